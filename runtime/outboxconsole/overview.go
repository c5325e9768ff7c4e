package outboxconsole

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"time"

	"github.com/outboxgen/outboxgen/runtime/internal/store"
	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// The overview page: the counts by type, the held and broken ordering keys, the alerts and the
// charts.

type typeRow struct {
	Type                                                 string
	Ref                                                  string // the type's reference (typeref.go)
	FailedURL                                            string
	Pending, Due, Processing, Stale, Stuck, Failed, Held int64
	OldestPending, OldestDue                             string
	Paused                                               bool
	Waiting                                              int64 // PENDING, not due yet: what Run now moves
}

type heldRow struct {
	Key        string
	Head       int64
	HeadType   string
	HeadStatus string
	Waiting    int64
	For        string
}

// pausedRow is one event type paused with outboxgen pause or outbox.Pause.
type pausedRow struct {
	Type, Reason, Since, Ends string
	Ref                       string // the type's reference, for its Resume button
}

type overviewData struct {
	Notice                 string
	Paused                 []pausedRow
	Cancelled              int64
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
	d := overviewData{Every: formatInterval(c.cfg.sampleEvery), MaxDueAge: formatAge(c.cfg.maxDueAge), Window: formatAge(c.cfg.window),
		Notice: c.controlNotice(r.URL.Query())}
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
		paused, err := outbox.Pauses(ctx, c.db)
		if err != nil {
			d.Err = c.errText(err)
			status = http.StatusServiceUnavailable
		}
		isPaused := make(map[string]bool, len(paused))
		for _, p := range paused {
			isPaused[p.EventType] = true
		}
		d.Alerts = alerts(snap, c.cfg.maxDueAge, c.cfg.maxHeldAge, c.cfg.window, recent, paused, c.clean)
		d.HeldKeys, d.OldestHeld = snap.HeldKeys, ageIf(snap.HeldKeys, snap.OldestHeld)
		d.BrokenKeys, d.Broken = snap.BrokenKeys, brokenRows(snap.Broken, c.clean)
		d.Cancelled = snap.Cancelled
		d.Paused = c.pausedRows(paused)
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
				OldestPending: ageIf(tc.Pending, tc.OldestPending), OldestDue: ageIf(tc.Due, tc.OldestDue),
				Paused: isPaused[t], Waiting: max(tc.Pending-tc.Due, 0)})
		}
		sort.Slice(d.Types, func(i, j int) bool { return d.Types[i].Type < d.Types[j].Type })
	}
	c.renderRefresh(w, r, status, "overview", d, 10)
}

// pausedRows lists the pauses in force for the banner, their text made inert by c.clean and
// html/template.
func (c *Console) pausedRows(ps []outbox.PausedType) []pausedRow {
	out := make([]pausedRow, len(ps))
	for i, p := range ps {
		ends := "at resume"
		if !p.Until.IsZero() {
			ends = "in " + formatAge(p.Left)
		}
		out[i] = pausedRow{Type: c.clean(p.EventType), Reason: c.clean(p.Reason), Since: p.Since.UTC().Format(time.RFC3339), Ends: ends,
			Ref: c.types.seal(p.EventType)}
	}
	return out
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
