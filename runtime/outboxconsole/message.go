package outboxconsole

import (
	"errors"
	"net/http"
	"sort"
	"strconv"

	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// The message page: one message, its times and its payload.

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
	Waiting               bool // PENDING and not due yet: Run now applies
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
	d := messageData{
		ID: id, Type: c.clean(rec.EventType), Key: c.clean(rec.IdempotencyKey), ClaimToken: c.clean(rec.ClaimToken),
		Status: string(rec.Status), Attempts: rec.Attempts, MaxAttempts: rec.MaxAttempts,
		LastError: c.cleanBlock(rec.LastError), Notice: notice(r.URL.Query()),
	}
	now := c.cfg.now()
	d.Waiting = rec.Status == outbox.StatusPending && rec.NextAttemptAt.After(now)
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
