package outboxconsole

import (
	"net/http"
	"net/url"
	"sort"
	"strconv"

	"github.com/outboxgen/outboxgen/runtime/internal/store"
	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// The FAILED list: a page of FAILED messages, of every type or one.

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

// notice is the line a page shows after a write redirected to it (?retried=N, ?purged=N,
// ?cancelled=N, ?rannow=N): numbers only, so a crafted link cannot put words on the page.
func notice(q url.Values) string {
	if n, err := strconv.ParseInt(q.Get("retried"), 10, 64); err == nil && n >= 0 {
		return "Retried " + strconv.FormatInt(n, 10) + " message(s): FAILED → PENDING, due now, attempts reset. Workers pick them up at their next poll."
	}
	if n, err := strconv.ParseInt(q.Get("purged"), 10, 64); err == nil && n >= 0 {
		return "Purged " + strconv.FormatInt(n, 10) + " FAILED message(s): deleted, never to be delivered."
	}
	if n, err := strconv.ParseInt(q.Get("cancelled"), 10, 64); err == nil && n >= 0 {
		return "Cancelled " + strconv.FormatInt(n, 10) + " message(s): PENDING → CANCELLED, never to be delivered; running ones become CANCELLED if their attempt fails."
	}
	if n, err := strconv.ParseInt(q.Get("rannow"), 10, 64); err == nil && n >= 0 {
		return "Made " + strconv.FormatInt(n, 10) + " waiting PENDING message(s) due now, attempts unchanged. Workers pick them up at their next poll."
	}
	return ""
}
