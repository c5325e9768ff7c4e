package outboxotel_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/runtime/outbox"
	"github.com/outboxgen/outboxgen/runtime/outboxotel"
	"github.com/outboxgen/outboxgen/runtime/outboxtest/testdb"
)

// A type whose handler keeps failing shows in outboxgen.failing_event_type while none of its
// messages is FAILED, and every handler start is recorded in outboxgen.delivery_lag.
func TestFailingTypeAndDeliveryLag(t *testing.T) {
	t.Parallel()
	db := testdb.Migrated(t)
	ctx := context.Background()
	for range 5 {
		enqueueTx(t, ctx, db.DB, "mail")
	}
	enqueueTx(t, ctx, db.DB, "sms")
	r := outbox.NewRouter()
	policy := outbox.Policy{MaxAttempts: 100, Backoff: outbox.Backoff{Initial: time.Minute, Max: time.Hour}}
	r.Handle("mail", policy, func(context.Context, json.RawMessage, outbox.Delivery) error {
		return errors.New("provider unavailable")
	})
	r.Handle("sms", fast, func(context.Context, json.RawMessage, outbox.Delivery) error { return nil })
	m := newMetrics(t)
	if _, err := outboxotel.RegisterStats(db, outboxotel.WithMeterProvider(m.mp)); err != nil {
		t.Fatal(err)
	}
	runWorker(t, newWorker(t, db.DB, r, newTracing(t), m.mp), func() bool {
		s := statsOf(t, db)
		return s.ByType["mail"].Retrying == 5 && s.ByType["sms"].Pending == 0 && s.ByType["sms"].Processing == 0
	})
	got := m.mustCollect(t)
	if v, n := point(got["outboxgen.failing_event_type"], map[string]string{"messaging.destination.name": "mail"}); v != 1 || n != 1 {
		t.Errorf("outboxgen.failing_event_type{mail} = %v in %d points, want 1 in 1", v, n)
	}
	if _, n := point(got["outboxgen.failing_event_type"], map[string]string{"messaging.destination.name": "sms"}); n != 0 {
		t.Errorf("outboxgen.failing_event_type has %d points for sms, want none", n)
	}
	for typ, want := range map[string]uint64{"mail": 5, "sms": 1} {
		if n := histCount(got["outboxgen.delivery_lag"], map[string]string{"messaging.destination.name": typ}); n != want {
			t.Errorf("outboxgen.delivery_lag{%s}: %d observations, want %d", typ, n, want)
		}
	}
}
