package outboxconsole

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/outboxgen/outboxgen/runtime/internal/store"
	"github.com/outboxgen/outboxgen/runtime/mysqllock"
	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// The read pages: overview, failed, message, jobs. Each runs the runtime's own calls
// (outbox.Stats, Retry's dry run, Inspect, mysqllock.LastRuns) or the console's list query, so
// the console, the CLI and an application's dashboard agree.

func (c *Console) ctx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), c.cfg.timeout)
}

// ---- overview ----

type typeRow struct {
	Type                                                 string
	Ref                                                  string // the type's reference (typeref.go)
	FailedURL                                            string
	Pending, Due, Processing, Stale, Stuck, Failed, Held int64
	OldestPending, OldestDue                             string
}

type heldRow struct {
	Key        string
	Head       int64
	HeadType   string
	HeadStatus string
	Waiting    int64
	For        string
}

type overviewData struct {
	HeldKeys               int64
	OldestHeld             string
	Held                   []heldRow
	BrokenKeys             int64
	Broken                 []brokenRow
	Err                    string
	Alerts                 []alert
	Total                  typeRow
	Types                  []typeRow
	Charts                 []chartPanel
	Every, Since           string
	SampleErr, SampleErrAt string
	MaxDueAge, Window      string
}

func (c *Console) overview(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	now := c.cfg.now()
	d := overviewData{Every: formatInterval(c.cfg.sampleEvery), MaxDueAge: formatAge(c.cfg.maxDueAge), Window: formatAge(c.cfg.window)}
	samples, errAt, sampleErr := c.samp.snapshot()
	d.Charts = charts(samples, now, 10*c.cfg.sampleEvery)
	if len(samples) > 0 {
		d.Since = samples[0].At.UTC().Format(time.TimeOnly)
	}
	if sampleErr != nil {
		d.SampleErr, d.SampleErrAt = c.errText(sampleErr), errAt.UTC().Format(time.TimeOnly)
	}
	status := http.StatusOK
	snap, err := outbox.Stats(ctx, c.db)
	var recent int64
	if err == nil && snap.Failed > 0 {
		recent, err = c.failedWithin(ctx, c.cfg.window)
	}
	if err != nil {
		d.Err = c.errText(err)
		status = http.StatusServiceUnavailable
	} else {
		d.Alerts = alerts(snap, c.cfg.maxDueAge, c.cfg.maxHeldAge, c.cfg.window, recent, c.clean)
		d.HeldKeys, d.OldestHeld = snap.HeldKeys, ageIf(snap.HeldKeys, snap.OldestHeld)
		d.BrokenKeys, d.Broken = snap.BrokenKeys, brokenRows(snap.Broken, c.clean)
		for _, h := range snap.Held {
			d.Held = append(d.Held, heldRow{Key: c.clean(h.OrderingKey), Head: int64(h.Head), HeadType: c.clean(h.HeadEventType),
				HeadStatus: string(h.HeadStatus), Waiting: h.Waiting, For: formatAge(h.For)})
		}
		d.Total = typeRow{Type: "total", Pending: snap.Pending, Due: snap.Due, Processing: snap.Processing,
			Stale: snap.Stale, Stuck: snap.Stuck, Failed: snap.Failed, Held: snap.HeldKeys,
			OldestPending: ageIf(snap.Pending, snap.OldestPending), OldestDue: ageIf(snap.Due, snap.OldestDue)}
		for t, tc := range snap.ByType {
			d.Types = append(d.Types, typeRow{Type: c.clean(t), Ref: c.types.seal(t), FailedURL: c.failedURL(t), Pending: tc.Pending, Due: tc.Due, Processing: tc.Processing,
				Stale: tc.Stale, Stuck: tc.Stuck, Failed: tc.Failed, Held: tc.Held,
				OldestPending: ageIf(tc.Pending, tc.OldestPending), OldestDue: ageIf(tc.Due, tc.OldestDue)})
		}
		sort.Slice(d.Types, func(i, j int) bool { return d.Types[i].Type < d.Types[j].Type })
	}
	c.renderRefresh(w, r, status, "overview", d, 10)
}

// failedWithin counts the messages that FAILED within window of the database clock, which
// wrote their failed_at: this process's clock may be off.
func (c *Console) failedWithin(ctx context.Context, window time.Duration) (int64, error) {
	n, err := store.New().MessageCountFailedWithin(ctx, c.db, window.Microseconds())
	if err != nil {
		return 0, fmt.Errorf("outboxconsole: count recent failures: %w", err)
	}
	return n, nil
}

// failedURL links to the FAILED list of event type t.
func (c *Console) failedURL(t string) string {
	v := url.Values{}
	c.typeQuery(v, t)
	return "failed?" + v.Encode()
}

// ageIf prints an age, or "-" when nothing is counted (as `outboxgen status` does).
func ageIf(n int64, d time.Duration) string {
	if n == 0 {
		return "-"
	}
	return formatAge(d)
}

// ---- failed ----

type failedRow struct {
	ID                    int64
	Type                  string
	Attempts, MaxAttempts int32
	FailedAt, Ago         string
	Error                 string
}

type typeOption struct {
	Name     string // as shown
	Ref      string // the type's reference (typeref.go)
	Failed   int64
	Selected bool
}

type failedData struct {
	Type             string // as shown
	Ref              string // the type's reference, when one is selected
	Types            []typeOption
	TotalFailed      int64
	Count            int64
	Rows             []failedRow
	Page, Pages      int64
	From, To         int64
	PrevURL, NextURL string
	Notice, Err      string
}

// errorHeadLen is how much of last_error the list shows (the message page shows it whole).
const errorHeadLen = 200

func (c *Console) failedList(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	q := r.URL.Query()
	d := failedData{Page: 1, Notice: notice(q)}
	eventType, err := c.types.eventType(q)
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	if p, err := strconv.ParseInt(q.Get("page"), 10, 64); err == nil && p > 1 {
		d.Page = p
	}
	snap, err := outbox.Stats(ctx, c.db)
	if err != nil {
		d.Err = c.errText(err)
		c.render(w, r, http.StatusServiceUnavailable, "failed", d)
		return
	}
	d.TotalFailed = snap.Failed
	d.Count = snap.Failed
	if eventType != "" {
		d.Count = snap.ByType[eventType].Failed
		d.Type, d.Ref = c.clean(eventType), c.types.seal(eventType)
	}
	seen := false
	for t, tc := range snap.ByType {
		if tc.Failed > 0 {
			d.Types = append(d.Types, typeOption{Name: c.clean(t), Ref: c.types.seal(t), Failed: tc.Failed, Selected: t == eventType})
			seen = seen || t == eventType
		}
	}
	if eventType != "" && !seen {
		d.Types = append(d.Types, typeOption{Name: d.Type, Ref: d.Ref, Selected: true})
	}
	sort.Slice(d.Types, func(i, j int) bool { return d.Types[i].Name < d.Types[j].Name })
	size := int64(c.cfg.pageSize)
	d.Pages = max((d.Count+size-1)/size, 1)
	offset := (d.Page - 1) * size
	var anyType int64
	if eventType == "" {
		anyType = 1
	}
	rows, err := store.New().MessageListFailedPage(ctx, c.db, store.MessageListFailedPageParams{
		AnyType: anyType, EventType: eventType, Limit: int32(size), Offset: int32(min(offset, 1<<31-1)),
	})
	if err != nil {
		d.Err = c.errText(err)
		c.render(w, r, http.StatusServiceUnavailable, "failed", d)
		return
	}
	now := c.cfg.now()
	for _, row := range rows {
		fr := failedRow{ID: row.ID, Type: c.clean(row.EventType), Attempts: row.Attempts, MaxAttempts: row.MaxAttempts,
			FailedAt: "-", Error: visibleLine(truncate(oneLine(c.cfg.redact(store.Text(row.LastError))), errorHeadLen))}
		if row.FailedAt.Valid {
			fr.FailedAt, fr.Ago = stamp(row.FailedAt.Time), ago(now, row.FailedAt.Time)
		}
		d.Rows = append(d.Rows, fr)
	}
	if len(rows) > 0 {
		d.From, d.To = offset+1, offset+int64(len(rows))
	}
	link := func(p int64) string {
		v := url.Values{}
		if eventType != "" {
			c.typeQuery(v, eventType)
		}
		if p > 1 {
			v.Set("page", strconv.FormatInt(p, 10))
		}
		if len(v) == 0 {
			return "failed"
		}
		return "failed?" + v.Encode()
	}
	if d.Page > 1 {
		d.PrevURL = link(min(d.Page-1, d.Pages))
	}
	if d.Page < d.Pages {
		d.NextURL = link(d.Page + 1)
	}
	c.render(w, r, http.StatusOK, "failed", d)
}

// notice is the line a page shows after a write redirected to it (?retried=N, ?purged=N):
// numbers only, so a crafted link cannot put words on the page.
func notice(q url.Values) string {
	if n, err := strconv.ParseInt(q.Get("retried"), 10, 64); err == nil && n >= 0 {
		return "Retried " + strconv.FormatInt(n, 10) + " message(s): FAILED → PENDING, due now, attempts reset. Workers pick them up at their next poll."
	}
	if n, err := strconv.ParseInt(q.Get("purged"), 10, 64); err == nil && n >= 0 {
		return "Purged " + strconv.FormatInt(n, 10) + " FAILED message(s): deleted, never to be delivered."
	}
	return ""
}

// ---- message ----

type timelineEntry struct {
	at    time.Time
	At    string
	What  string
	Note  string
	Class string
}

type header struct{ Key, Value string }

type messageData struct {
	ID                    int64
	OrderingKey           string
	Headers               []header
	Type, Key, ClaimToken string
	Status                string
	Explain               string
	Attempts, MaxAttempts int
	Timeline              []timelineEntry
	LastError             string
	Payload, PayloadNote  string
	Notice                string
}

func (c *Console) message(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	id, err := strconv.ParseInt(r.URL.Query().Get("id"), 10, 64)
	if err != nil || id <= 0 {
		c.fail(w, r, http.StatusBadRequest, "message?id=N wants a positive message id.")
		return
	}
	rec, err := outbox.Inspect(ctx, c.db, outbox.MessageID(id))
	if errors.Is(err, outbox.ErrNotFound) {
		c.fail(w, r, http.StatusNotFound, "No message "+strconv.FormatInt(id, 10)+" (purged, or never existed).")
		return
	}
	if err != nil {
		c.fail(w, r, http.StatusServiceUnavailable, "Cannot read the message: "+c.errText(err))
		return
	}
	now := c.cfg.now()
	d := messageData{
		ID: id, Type: c.clean(rec.EventType), Key: c.clean(rec.IdempotencyKey), ClaimToken: c.clean(rec.ClaimToken),
		Status: string(rec.Status), Attempts: rec.Attempts, MaxAttempts: rec.MaxAttempts,
		LastError: c.cleanBlock(rec.LastError), Notice: notice(r.URL.Query()),
	}
	d.OrderingKey = c.clean(rec.OrderingKey)
	for k, v := range rec.Headers {
		d.Headers = append(d.Headers, header{Key: c.clean(k), Value: c.clean(v)})
	}
	sort.Slice(d.Headers, func(i, j int) bool { return d.Headers[i].Key < d.Headers[j].Key })
	if d.Key == "" {
		d.Key = "msg:" + strconv.FormatInt(id, 10) + " (none stored: the worker delivers this)"
	}
	if d.ClaimToken == "" {
		d.ClaimToken = "-"
	}
	d.Explain = explain(rec, now)
	d.Timeline = timeline(rec, now)
	d.Payload, d.PayloadNote = c.payloadText(rec.Payload)
	refresh := 0
	if rec.Status == outbox.StatusPending || rec.Status == outbox.StatusProcessing {
		refresh = 3 // on its way: show it arrive
	}
	c.renderRefresh(w, r, http.StatusOK, "message", d, refresh)
}

// explain says in a few words what a message's status means for it now.
func explain(rec outbox.Record, now time.Time) string {
	switch rec.Status {
	case outbox.StatusPending:
		if rec.NextAttemptAt.After(now) {
			return "due in " + formatAge(rec.NextAttemptAt.Sub(now)) + " (backoff or delay)"
		}
		return "due: waiting for a worker"
	case outbox.StatusProcessing:
		lease := rec.ReclaimAfter.Sub(rec.ClaimedAt)
		switch {
		case lease > 0 && now.Sub(rec.ClaimedAt) > 3*lease:
			return "stuck: past 3x its lease, nobody is reclaiming"
		case now.After(rec.ReclaimAfter):
			return "stale: past its lease; a live worker reclaims it"
		}
		return "a worker's handler has it; lease until " + stamp(rec.ReclaimAfter)
	case outbox.StatusSent:
		return "delivered"
	case outbox.StatusFailed:
		return "not tried again until someone retries it"
	}
	return ""
}

// timeline lists the row's times in order: what the table knows of the message's life (one
// claim, the last; attempts counts them all).
func timeline(rec outbox.Record, now time.Time) []timelineEntry {
	var out []timelineEntry
	add := func(t time.Time, what, class string) {
		if t.IsZero() {
			return
		}
		out = append(out, timelineEntry{at: t, At: stamp(t), What: what, Note: ago(now, t), Class: class})
	}
	add(rec.CreatedAt, "enqueued", "t-created")
	switch {
	case rec.Status == outbox.StatusPending && rec.Attempts > 0:
		add(rec.NextAttemptAt, "due again (attempt "+strconv.Itoa(rec.Attempts+1)+" of "+strconv.Itoa(rec.MaxAttempts)+")", "t-due")
	case rec.Status == outbox.StatusPending:
		add(rec.NextAttemptAt, "due", "t-due")
	case !rec.NextAttemptAt.Equal(rec.CreatedAt):
		add(rec.NextAttemptAt, "last due", "t-due")
	}
	if !rec.ClaimedAt.IsZero() {
		add(rec.ClaimedAt, "claimed (attempt "+strconv.Itoa(rec.Attempts)+" of "+strconv.Itoa(rec.MaxAttempts)+", the last claim)", "t-claim")
		if rec.Status == outbox.StatusProcessing {
			add(rec.ReclaimAfter, "lease ends", "t-lease")
		}
	}
	add(rec.SentAt, "sent", "t-sent")
	add(rec.FailedAt, "failed", "t-failed")
	sort.SliceStable(out, func(i, j int) bool { return out[i].at.Before(out[j].at) })
	return out
}

// ---- jobs ----

type jobRow struct {
	Job, Instance                  string
	Period, Ago, Started, Finished string
	Took                           string
}

type jobsData struct {
	Job  string
	Runs []jobRow
	Err  string
}

func (c *Console) jobs(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	d := jobsData{Job: r.URL.Query().Get("job")}
	var runs []mysqllock.JobRun
	var err error
	if d.Job != "" {
		runs, err = mysqllock.Runs(ctx, c.db, d.Job, 100)
	} else {
		runs, err = mysqllock.LastRuns(ctx, c.db, 500)
	}
	status := http.StatusOK
	if err != nil {
		d.Err, status = c.errText(err), http.StatusServiceUnavailable
	}
	now := c.cfg.now()
	for _, run := range runs {
		d.Runs = append(d.Runs, jobRow{
			Job: c.clean(run.Job), Instance: c.clean(run.Instance), Period: stamp(run.PeriodStart), Ago: ago(now, run.PeriodStart),
			Started: stamp(run.StartedAt), Finished: stamp(run.FinishedAt), Took: formatTook(run.FinishedAt.Sub(run.StartedAt)),
		})
	}
	d.Job = c.clean(d.Job)
	c.render(w, r, status, "jobs", d)
}

// ---- formatting ----

// stamp prints a database time (UTC) to the millisecond.
func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05.000")
}

// ago prints how long before now t was ("3m12s ago"), or after ("in 40s").
func ago(now, t time.Time) string {
	if t.IsZero() {
		return ""
	}
	if d := now.Sub(t); d >= 0 {
		return formatAge(d) + " ago"
	}
	return "in " + formatAge(t.Sub(now))
}

// formatInterval prints a sampling interval: 10s, or 250ms below a second.
func formatInterval(d time.Duration) string {
	if d < time.Second {
		return d.String()
	}
	return formatAge(d)
}

func formatTook(d time.Duration) string {
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return formatAge(d)
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// truncate cuts s after n characters, marking the cut with "…". A byte that is not UTF-8
// counts as one character and stays as it is, for visibleLine to escape.
func truncate(s string, n int) string {
	for i := 0; i < len(s); n-- {
		if n == 0 {
			return s[:i] + "…"
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return s
}
