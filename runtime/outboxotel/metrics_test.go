package outboxotel_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/outboxgen/outboxgen/runtime/outbox"
	"github.com/outboxgen/outboxgen/runtime/outboxotel"
	"github.com/outboxgen/outboxgen/runtime/outboxtest/testdb"
)

// outboxprom's known mix, read through a manual reader: 3 welcome_email sent at once, 1 flaky
// retried once then sent, 1 doomed failed permanently, and 1 welcome_email left PROCESSING by
// a "dead worker" with an expired lease, which the worker reclaims and then sends.
func TestWorkerMetrics(t *testing.T) {
	t.Parallel()
	db := testdb.Migrated(t)
	ctx := context.Background()
	for range 3 {
		enqueueTx(t, ctx, db.DB, "welcome_email")
	}
	enqueueTx(t, ctx, db.DB, "flaky")
	enqueueTx(t, ctx, db.DB, "doomed")
	db.MustExec(t, `INSERT INTO outbox_messages (event_type, payload, status, attempts, max_attempts,
		next_attempt_at, claimed_at, reclaim_after, claim_token, created_at)
		VALUES ('welcome_email', '{}', 'PROCESSING', 1, 10, UTC_TIMESTAMP(6),
		TIMESTAMPADD(SECOND, -400, UTC_TIMESTAMP(6)), TIMESTAMPADD(SECOND, -100, UTC_TIMESTAMP(6)), 'dead', UTC_TIMESTAMP(6))`)

	var flakyCalls atomic.Int32
	r := outbox.NewRouter()
	r.Handle("welcome_email", fast, func(context.Context, json.RawMessage, outbox.Delivery) error { return nil })
	r.Handle("flaky", fast, func(context.Context, json.RawMessage, outbox.Delivery) error {
		if flakyCalls.Add(1) == 1 {
			return errors.New("smtp: 421 try again later")
		}
		return nil
	})
	r.Handle("doomed", fast, func(context.Context, json.RawMessage, outbox.Delivery) error {
		return outbox.Permanent(errors.New("mailbox does not exist"))
	})
	m := newMetrics(t)
	tr := newTracing(t)
	if _, err := outboxotel.RegisterStats(db, outboxotel.WithMeterProvider(m.mp)); err != nil {
		t.Fatal(err)
	}
	runWorker(t, newWorker(t, db.DB, r, tr, m.mp), drained(t, db, 1))

	got := m.mustCollect(t)
	for _, c := range []struct {
		name  string
		attrs map[string]string
		want  float64
	}{
		{"messaging.client.consumed.messages", map[string]string{"messaging.operation.name": "claim"}, 7},
		{"outboxgen.handled.messages", map[string]string{"messaging.destination.name": "welcome_email", "outboxgen.outcome": "sent"}, 4},
		{"outboxgen.handled.messages", map[string]string{"messaging.destination.name": "flaky", "outboxgen.outcome": "sent"}, 1},
		{"outboxgen.handled.messages", map[string]string{"messaging.destination.name": "flaky", "outboxgen.outcome": "retried"}, 1},
		{"outboxgen.handled.messages", map[string]string{"messaging.destination.name": "doomed", "outboxgen.outcome": "failed"}, 1},
		{"outboxgen.handled.messages", nil, 7},
		{"outboxgen.reclaimed.messages", nil, 1},
		{"outboxgen.stuck_seen.messages", nil, 0},
		// The gauges, read at this collection: only the FAILED doomed row is left.
		{"outboxgen.messages", map[string]string{"messaging.destination.name": "doomed", "outboxgen.status": "FAILED"}, 1},
		{"outboxgen.messages", map[string]string{"messaging.destination.name": "doomed", "outboxgen.status": "PENDING"}, 0},
		{"outboxgen.messages", map[string]string{"messaging.destination.name": "doomed", "outboxgen.status": "PROCESSING"}, 0},
		{"outboxgen.messages", nil, 1},
		{"outboxgen.due.messages", nil, 0},
		{"outboxgen.oldest_pending.age", nil, 0},
		{"outboxgen.oldest_due.age", nil, 0},
		{"outboxgen.stale.messages", nil, 0},
		{"outboxgen.stuck.messages", nil, 0},
	} {
		if v, _ := point(got[c.name], c.attrs); v != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.attrs, v, c.want)
		}
	}
	for _, c := range []struct {
		eventType, outcome string
		n                  uint64
	}{
		{"welcome_email", "sent", 4}, {"flaky", "retried", 1}, {"flaky", "sent", 1}, {"doomed", "failed", 1},
	} {
		if n := histCount(got["messaging.process.duration"], map[string]string{"messaging.destination.name": c.eventType, "outboxgen.outcome": c.outcome}); n != c.n {
			t.Errorf("messaging.process.duration %s/%s: %d observations, want %d", c.eventType, c.outcome, n, c.n)
		}
	}
	if h := got["messaging.process.duration"].Data.(metricdata.Histogram[float64]); len(h.DataPoints) != 4 {
		t.Errorf("messaging.process.duration: %d series, want 4", len(h.DataPoints))
	}
	// flaky's retry needs a second claim after the first; the reclaimed row may share either.
	if n := histCount(got["messaging.client.operation.duration"], map[string]string{"messaging.operation.name": "claim"}); n < 2 {
		t.Errorf("claim duration observations = %d, want at least 2", n)
	}
	// Every handler call was a span too.
	if n := len(tr.rec.Ended()); n != 7 {
		t.Errorf("%d spans, want 7 (one per handler call)", n)
	}
}

// The gauges from the table, without a worker: the numbers outbox.Stats reports.
func TestStatsGauges(t *testing.T) {
	t.Parallel()
	db := testdb.Migrated(t)
	ctx := context.Background()
	for range 2 {
		enqueueTx(t, ctx, db.DB, "welcome_email")
	}
	enqueueTx(t, ctx, db.DB, "welcome_email", outbox.Delay(time.Hour))
	old := enqueueTx(t, ctx, db.DB, "invoice_paid")
	db.MustExec(t, "UPDATE outbox_messages SET created_at = TIMESTAMPADD(MINUTE, -30, created_at) WHERE id = ?", old)
	cancelled := enqueueTx(t, ctx, db.DB, "invoice_paid")
	if n, err := outbox.Cancel(ctx, db.DB, outbox.Filter{IDs: []outbox.MessageID{cancelled}}); err != nil || n != 1 {
		t.Fatalf("Cancel = %d, %v; want 1 message cancelled", n, err)
	}
	db.MustExec(t, `INSERT INTO outbox_messages (event_type, payload, status, attempts, max_attempts,
		next_attempt_at, created_at, sent_at) VALUES ('welcome_email', '{}', 'SENT', 1, 10,
		UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))`)
	// Claimed 20 minutes ago with a 5 minute lease: stale, and past 3x: stuck.
	db.MustExec(t, `INSERT INTO outbox_messages (event_type, payload, status, attempts, max_attempts,
		next_attempt_at, claimed_at, reclaim_after, claim_token, created_at)
		VALUES ('welcome_email', '{}', 'PROCESSING', 1, 10, UTC_TIMESTAMP(6),
		TIMESTAMPADD(MINUTE, -20, UTC_TIMESTAMP(6)), TIMESTAMPADD(MINUTE, -15, UTC_TIMESTAMP(6)), 'gone', UTC_TIMESTAMP(6))`)

	m := newMetrics(t)
	reg, err := outboxotel.RegisterStats(db, outboxotel.WithMeterProvider(m.mp), outboxotel.WithStatsTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got := m.mustCollect(t)
	for _, c := range []struct {
		name  string
		attrs map[string]string
		want  float64
	}{
		{"outboxgen.messages", map[string]string{"messaging.destination.name": "welcome_email", "outboxgen.status": "PENDING"}, 3},
		{"outboxgen.messages", map[string]string{"messaging.destination.name": "welcome_email", "outboxgen.status": "PROCESSING"}, 1},
		{"outboxgen.messages", map[string]string{"messaging.destination.name": "welcome_email", "outboxgen.status": "FAILED"}, 0},
		{"outboxgen.messages", map[string]string{"messaging.destination.name": "invoice_paid", "outboxgen.status": "PENDING"}, 1},
		{"outboxgen.messages", map[string]string{"messaging.destination.name": "invoice_paid", "outboxgen.status": "PROCESSING"}, 0},
		{"outboxgen.messages", map[string]string{"messaging.destination.name": "invoice_paid", "outboxgen.status": "CANCELLED"}, 1},
		{"outboxgen.messages", map[string]string{"messaging.destination.name": "welcome_email", "outboxgen.status": "CANCELLED"}, 0},
		{"outboxgen.due.messages", nil, 3},
		{"outboxgen.stale.messages", nil, 1},
		{"outboxgen.stuck.messages", nil, 1},
	} {
		if v, n := point(got[c.name], c.attrs); v != c.want || n == 0 {
			t.Errorf("%s%v = %v (%d points), want %v", c.name, c.attrs, v, n, c.want)
		}
	}
	if _, n := point(got["outboxgen.messages"], nil); n != 8 {
		t.Errorf("outboxgen.messages: %d series, want 8 (4 statuses x 2 types; never SENT)", n)
	}
	if age, _ := point(got["outboxgen.oldest_pending.age"], nil); age < 1800 || age > 1900 {
		t.Errorf("outboxgen.oldest_pending.age = %v, want about 1800 (the invoice_paid row made 30m old)", age)
	}
	// No ordering key: nothing held, and no head ids.
	if v, n := point(got["outboxgen.held_ordering_keys"], nil); v != 0 || n != 2 {
		t.Errorf("outboxgen.held_ordering_keys = %v over %d points, want 0 for each of the 2 types", v, n)
	}
	if v, n := point(got["outboxgen.oldest_held.age"], nil); v != 0 || n != 1 {
		t.Errorf("outboxgen.oldest_held.age = %v (%d points), want 0", v, n)
	}
	if _, n := point(got["outboxgen.held_ordering_key.head_id"], nil); n != 0 {
		t.Errorf("outboxgen.held_ordering_key.head_id: %d points, want none", n)
	}
	if got["outboxgen.oldest_pending.age"].Unit != "s" || got["outboxgen.messages"].Unit != "{message}" {
		t.Errorf("units %q, %q; want s and {message}", got["outboxgen.oldest_pending.age"].Unit, got["outboxgen.messages"].Unit)
	}
	if err := reg.Unregister(); err != nil {
		t.Fatal(err)
	}
	if _, n := point(m.mustCollect(t)["outboxgen.messages"], nil); n != 0 {
		t.Error("outboxgen.messages still reported after Unregister")
	}
}

// A collection whose query fails reports the error, and no stale or zero values.
func TestStatsGaugesQueryError(t *testing.T) {
	t.Parallel()
	db := testdb.New(t) // no schema: the Stats query fails (table missing)
	m := newMetrics(t)
	if _, err := outboxotel.RegisterStats(db, outboxotel.WithMeterProvider(m.mp)); err != nil {
		t.Fatal(err)
	}
	got, err := m.collect(t)
	if err == nil || !strings.Contains(err.Error(), "outbox: Stats") || !strings.Contains(err.Error(), "doesn't exist") {
		t.Fatalf("collect error = %v; want the Stats failure (missing outbox_messages)", err)
	}
	for _, name := range []string{"outboxgen.messages", "outboxgen.due.messages", "outboxgen.stuck.messages"} {
		if mm, ok := got[name]; ok {
			if _, n := point(mm, nil); n != 0 {
				t.Errorf("%s has %d points after a failed query, want none", name, n)
			}
		}
	}
}

// A worker that does not reclaim still watches: each stuck sighting reaches the counter.
func TestWorkerStuckSeen(t *testing.T) {
	t.Parallel()
	db := testdb.Migrated(t)
	db.MustExec(t, `INSERT INTO outbox_messages (event_type, payload, status, attempts, max_attempts,
		next_attempt_at, claimed_at, reclaim_after, claim_token, created_at)
		VALUES ('welcome_email', '{}', 'PROCESSING', 1, 10, UTC_TIMESTAMP(6),
		TIMESTAMPADD(MINUTE, -20, UTC_TIMESTAMP(6)), TIMESTAMPADD(MINUTE, -15, UTC_TIMESTAMP(6)), 'gone', UTC_TIMESTAMP(6))`)
	r := outbox.NewRouter()
	r.Handle("welcome_email", outbox.Policy{}, func(context.Context, json.RawMessage, outbox.Delivery) error { return nil })
	m := newMetrics(t)
	p := make(polls, 1)
	cfg, err := outboxotel.Instrument(outbox.Config{
		PollInterval: 20 * time.Millisecond, ReclaimInterval: 20 * time.Millisecond, DisableReclaim: true,
		Logger: quietLogger(), Observer: p,
	}, outboxotel.WithMeterProvider(m.mp), outboxotel.WithTracerProvider(newTracing(t).tp))
	if err != nil {
		t.Fatal(err)
	}
	w, err := outbox.NewWorker(db.DB, r, cfg)
	if err != nil {
		t.Fatal(err)
	}
	stuck := func() float64 {
		v, _ := point(m.mustCollect(t)["outboxgen.stuck_seen.messages"], nil)
		return v
	}
	runWorker(t, worker{w, p}, func() bool { return stuck() >= 2 })
	if v := stuck(); v < 2 {
		t.Errorf("outboxgen.stuck_seen.messages = %v, want >= 2", v)
	}
}

// Held ordering keys, as outboxprom shows them: how many by the head's event type, the longest
// wait, and the message holding each key. Keys are VARBINARY: one that is not UTF-8 (Enqueue
// refuses it, a row written by other means may hold it) is written with \xNN escapes, since an
// attribute value must be UTF-8; two keys that then read alike give one point, the longer held.
func TestStatsGaugesHeldKeys(t *testing.T) {
	t.Parallel()
	db := testdb.Migrated(t)
	// Three held keys, each a FAILED head (seq 1) with one PENDING message behind it (seq 2),
	// the earlier keys' waiting message enqueued longer ago (held longest first): 'bad' and the
	// byte 0xFF (not UTF-8), the valid text `bad\xFF` (which spells out that escape), and a
	// valid key with a non-ASCII letter whose head is another event type.
	keys := []struct{ key, eventType string }{{"bad\xff", "order_event"}, {"bad\\xFF", "order_event"}, {"ok:\u00e9", "shipment"}}
	heads := make([]int64, len(keys))
	for i, k := range keys {
		heads[i] = db.HeldKey(t, k.key, k.eventType, 10-i)
	}
	m := newMetrics(t)
	if _, err := outboxotel.RegisterStats(db, outboxotel.WithMeterProvider(m.mp)); err != nil {
		t.Fatal(err)
	}
	got := m.mustCollect(t)
	for _, c := range []struct {
		attrs map[string]string
		want  float64
	}{
		{map[string]string{"messaging.destination.name": "order_event"}, 2},
		{map[string]string{"messaging.destination.name": "shipment"}, 1},
		{nil, 3},
	} {
		if v, _ := point(got["outboxgen.held_ordering_keys"], c.attrs); v != c.want {
			t.Errorf("outboxgen.held_ordering_keys%v = %v, want %v", c.attrs, v, c.want)
		}
	}
	if age, _ := point(got["outboxgen.oldest_held.age"], nil); age < 590 || age > 700 {
		t.Errorf("outboxgen.oldest_held.age = %v, want about 600 (the first key's waiting message, enqueued 10 minutes ago)", age)
	}
	head := got["outboxgen.held_ordering_key.head_id"]
	for _, c := range []struct {
		key, eventType string
		want           int64
	}{
		{`bad\xFF`, "order_event", heads[0]}, // the key that is not UTF-8, escaped; the longer held of the two that read alike
		{"ok:\u00e9", "shipment", heads[2]},
	} {
		if v, n := point(head, map[string]string{"outboxgen.ordering_key": c.key, "outboxgen.status": "FAILED", "messaging.destination.name": c.eventType}); n != 1 || int64(v) != c.want {
			t.Errorf("head_id{ordering_key=%q} = %v (%d points), want %d", c.key, v, n, c.want)
		}
	}
	if _, n := point(head, nil); n != 2 {
		t.Errorf("outboxgen.held_ordering_key.head_id: %d points, want 2 (the two keys that read alike give one)", n)
	}
	attributesUTF8(t, got)
}

// Event types are VARBINARY as well: a row whose event_type is not UTF-8 is reported under the
// escaped name (an attribute value must be UTF-8), together with a type that reads alike.
func TestStatsGaugesEventTypeNotUTF8(t *testing.T) {
	t.Parallel()
	db := testdb.Migrated(t)
	for _, typ := range []string{"bad\xff", "bad\\xFF", "bad\\xFF", "welcome_email"} {
		db.Pending(t, typ)
	}
	db.HeldKey(t, "orders:1", "bad\xfe", 1)
	m := newMetrics(t)
	if _, err := outboxotel.RegisterStats(db, outboxotel.WithMeterProvider(m.mp)); err != nil {
		t.Fatal(err)
	}
	got := m.mustCollect(t)
	for _, c := range []struct {
		name  string
		attrs map[string]string
		want  float64
	}{
		{"outboxgen.messages", map[string]string{"messaging.destination.name": `bad\xFF`, "outboxgen.status": "PENDING"}, 3},
		{"outboxgen.messages", map[string]string{"messaging.destination.name": "welcome_email", "outboxgen.status": "PENDING"}, 1},
		{"outboxgen.held_ordering_keys", map[string]string{"messaging.destination.name": `bad\xFE`}, 1},
		{"outboxgen.held_ordering_key.head_id", map[string]string{"messaging.destination.name": `bad\xFE`, "outboxgen.ordering_key": "orders:1"}, -1},
	} {
		v, n := point(got[c.name], c.attrs)
		if n != 1 || c.want >= 0 && v != c.want {
			t.Errorf("%s%v = %v (%d points), want %v in one point", c.name, c.attrs, v, n, c.want)
		}
	}
	attributesUTF8(t, got)
}

// attributesUTF8 fails the test for each attribute value of the gauges that is not UTF-8.
func attributesUTF8(t *testing.T, got map[string]metricdata.Metrics) {
	t.Helper()
	for name, mm := range got {
		if g, ok := mm.Data.(metricdata.Gauge[int64]); ok {
			for _, p := range g.DataPoints {
				for _, kv := range p.Attributes.ToSlice() {
					if !utf8.ValidString(kv.Value.Emit()) {
						t.Errorf("%s: attribute %s = %q is not UTF-8", name, kv.Key, kv.Value.Emit())
					}
				}
			}
		}
	}
}
