package outboxprom_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/outboxgen/outboxgen/runtime/outbox"
	"github.com/outboxgen/outboxgen/runtime/outboxprom"
	"github.com/outboxgen/outboxgen/runtime/outboxtest/testdb"
)

// heldGauges gathers outbox_held_ordering_key_head_id: head id by ordering_key, with the
// head_status label; held and oldest are outbox_held_ordering_keys and
// outbox_oldest_held_age_seconds. The registry's Gather must succeed.
func heldGauges(t *testing.T, g prometheus.Gatherer) (heads map[string]float64, status map[string]string, held, oldest float64) {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	heads, status, held, oldest = map[string]float64{}, map[string]string{}, -1, -1
	for _, mf := range mfs {
		switch mf.GetName() {
		case "outbox_held_ordering_keys":
			held = mf.GetMetric()[0].GetGauge().GetValue()
		case "outbox_oldest_held_age_seconds":
			oldest = mf.GetMetric()[0].GetGauge().GetValue()
		case "outbox_held_ordering_key_head_id":
			for _, m := range mf.GetMetric() {
				labels := map[string]string{}
				for _, lp := range m.GetLabel() {
					labels[lp.GetName()] = lp.GetValue()
				}
				heads[labels["ordering_key"]] = m.GetGauge().GetValue()
				status[labels["ordering_key"]] = labels["head_status"]
			}
		}
	}
	return heads, status, held, oldest
}

func enqueueMessage(t *testing.T, db *testdb.DB, m outbox.Message) outbox.MessageID {
	t.Helper()
	id, err := outbox.Enqueue(context.Background(), db, m, outbox.Standalone())
	if err != nil {
		t.Fatalf("enqueue %s: %v", m.EventType, err)
	}
	return id
}

func inspect(t *testing.T, db *testdb.DB, id outbox.MessageID) outbox.Record {
	t.Helper()
	r, err := outbox.Inspect(context.Background(), db, id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A real FAILED ordered head with a message waiting behind it: the collector shows one held
// key, its age and the head's id; once the head is retried and the key drained, the series
// is gone from the next scrape.
func TestStatsCollectorHeldKeyHead(t *testing.T) {
	t.Parallel()
	db := testdb.Migrated(t)
	ctx := context.Background()
	ordered := func(n int) outbox.MessageID {
		t.Helper()
		return enqueueMessage(t, db, outbox.Message{EventType: "order_event", Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, n)), OrderingKey: "orders:7"})
	}
	head := ordered(1)
	next := ordered(2)
	var failing atomic.Bool
	failing.Store(true)
	r := outbox.NewRouter()
	r.Handle("order_event", outbox.Policy{MaxAttempts: 1}, func(context.Context, json.RawMessage, outbox.Delivery) error {
		if failing.Load() {
			return outbox.Permanent(errors.New("warehouse API: 400 unknown sku"))
		}
		return nil
	})
	cfg := outbox.Config{PollInterval: 20 * time.Millisecond, Logger: quietLogger()}
	runWorker(t, db.DB, r, cfg, outboxprom.NewObserver(), func() bool { return inspect(t, db, head).Status == outbox.StatusFailed })
	if st := inspect(t, db, next).Status; st != outbox.StatusPending {
		t.Fatalf("message %d behind the FAILED head is %s, want PENDING (held)", next, st)
	}

	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(outboxprom.NewStatsCollector(db))
	heads, status, held, oldest := heldGauges(t, reg)
	if held != 1 {
		t.Errorf("outbox_held_ordering_keys = %v, want 1", held)
	}
	if oldest <= 0 {
		t.Errorf("outbox_oldest_held_age_seconds = %v, want > 0 (message %d has waited since its enqueue)", oldest, next)
	}
	if len(heads) != 1 || heads["orders:7"] != float64(head) || status["orders:7"] != "FAILED" {
		t.Errorf("outbox_held_ordering_key_head_id = %v (status %v), want {orders:7: %d} with head_status FAILED", heads, status, head)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}

	failing.Store(false)
	if n, err := outbox.Retry(ctx, db, outbox.Filter{IDs: []outbox.MessageID{head}}); err != nil || n != 1 {
		t.Fatalf("Retry = %d, %v; want 1", n, err)
	}
	runWorker(t, db.DB, r, cfg, outboxprom.NewObserver(), func() bool { return inspect(t, db, next).Status == outbox.StatusSent })
	heads, _, held, oldest = heldGauges(t, reg)
	if held != 0 || oldest != 0 || len(heads) != 0 {
		t.Errorf("after Retry and drain: held_ordering_keys %v, oldest_held_age %v, head ids %v; want 0, 0 and no series", held, oldest, heads)
	}
	if n := testutil.CollectAndCount(outboxprom.NewStatsCollector(db), "outbox_held_ordering_key_head_id"); n != 0 {
		t.Errorf("outbox_held_ordering_key_head_id series after the drain = %d, want 0", n)
	}
}

// Ordering keys are application data stored as VARBINARY: a key that is not UTF-8 (Enqueue
// refuses one, a row written by other means may have one) must not break the scrape, since
// Prometheus label values must be UTF-8. Two such keys that escape alike give one series.
func TestStatsCollectorHeldKeyNotUTF8(t *testing.T) {
	t.Parallel()
	db := testdb.Migrated(t)
	// Three held keys, each a FAILED head (seq 1) with one PENDING message behind it (seq 2):
	// 'bad' and the byte 0xFF (not UTF-8), the valid text `bad\xFF` (which spells out the first
	// one's escape), and a valid key with a non-ASCII letter.
	// The waiting message is enqueued longer ago for earlier keys: held longest first.
	for i, key := range []string{"bad\xff", "bad\\xFF", "ok:\u00e9"} {
		db.HeldKey(t, key, "order_event", 10-i)
	}
	s, err := outbox.Stats(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	if s.HeldKeys != 3 || len(s.Held) != 3 || s.Held[0].OrderingKey != "bad\xff" {
		t.Fatalf("Stats: %d held, %+v; want 3, the non-UTF-8 key 'bad\\xff' first, as stored", s.HeldKeys, s.Held)
	}

	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(outboxprom.NewStatsCollector(db))
	heads, _, held, _ := heldGauges(t, reg) // fails the test if the scrape fails
	if held != 3 {
		t.Errorf("outbox_held_ordering_keys = %v, want 3 (every held key counted)", held)
	}
	if heads["bad\\xFF"] != float64(s.Held[0].Head) || heads["ok:\u00e9"] != float64(s.Held[2].Head) || len(heads) != 2 {
		t.Errorf("head ids = %v; want bad\\xFF (the longer held, not UTF-8, escaped) -> %d and ok:\u00e9 -> %d",
			heads, s.Held[0].Head, s.Held[2].Head)
	}
	for k := range heads {
		if strings.ContainsRune(k, '\ufffd') {
			t.Errorf("label %q: want invalid bytes as \\xNN, not U+FFFD", k)
		}
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

// Event types are VARBINARY as well: a row whose event_type is not UTF-8 (written by other means
// than Enqueue) must not break the scrape. It is counted under the escaped name, together with
// a type that spells that escape out.
func TestStatsCollectorEventTypeNotUTF8(t *testing.T) {
	t.Parallel()
	db := testdb.Migrated(t)
	for _, typ := range []string{"bad\xff", "bad\\xFF", "bad\\xFF", "welcome_email"} {
		db.Pending(t, typ)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(outboxprom.NewStatsCollector(db))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	pending := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "outbox_messages" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			if labels["status"] == "PENDING" {
				pending[labels["event_type"]] += m.GetGauge().GetValue()
			}
		}
	}
	if len(pending) != 2 || pending["bad\\xFF"] != 3 || pending["welcome_email"] != 1 {
		t.Errorf("outbox_messages{status=PENDING} by event_type = %v, want bad\\xFF: 3 (the type that is not UTF-8, escaped, with the one that reads alike) and welcome_email: 1", pending)
	}
}
