package outboxprom_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/outboxgen/outboxgen/runtime/outbox"
	"github.com/outboxgen/outboxgen/runtime/outboxprom"
	"github.com/outboxgen/outboxgen/runtime/outboxtest/testdb"
)

// A type whose handler keeps failing shows as outbox_failing_event_type 1 while none of its
// messages is FAILED, and every handler start is observed in outbox_delivery_lag_seconds.
func TestFailingTypeAndDeliveryLag(t *testing.T) {
	t.Parallel()
	db := testdb.Migrated(t)
	for i := 0; i < 5; i++ {
		enqueue(t, db, "mail")
	}
	enqueue(t, db, "sms")
	r := outbox.NewRouter()
	policy := outbox.Policy{MaxAttempts: 100, Backoff: outbox.Backoff{Initial: time.Minute, Max: time.Hour}}
	r.Handle("mail", policy, func(context.Context, json.RawMessage, outbox.Delivery) error {
		return errors.New("provider unavailable")
	})
	r.Handle("sms", outbox.Policy{}, func(context.Context, json.RawMessage, outbox.Delivery) error { return nil })
	obs := outboxprom.NewObserver()
	reg := prometheus.NewRegistry()
	reg.MustRegister(obs)
	runWorker(t, db.DB, r, outbox.Config{PollInterval: 20 * time.Millisecond, Logger: quietLogger()}, obs, func() bool {
		s := statsOf(t, db)
		return s.ByType["mail"].Retrying == 5 && s.ByType["sms"].Pending == 0 && s.ByType["sms"].Processing == 0
	})
	want := `
# HELP outbox_failing_event_type 1 for each event type whose handlers keep failing: 5 or more of its messages wait for a retry and none was sent in the last 30s. It shows before any message is FAILED. Alert on it.
# TYPE outbox_failing_event_type gauge
outbox_failing_event_type{event_type="mail"} 1
`
	c := outboxprom.NewStatsCollector(db)
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "outbox_failing_event_type"); err != nil {
		t.Error(err)
	}
	if n := histogramCount(t, reg, "outbox_delivery_lag_seconds", map[string]string{"event_type": "mail"}); n != 5 {
		t.Errorf("mail delivery lag samples: %d, want 5", n)
	}
	if n := histogramCount(t, reg, "outbox_delivery_lag_seconds", map[string]string{"event_type": "sms"}); n != 1 {
		t.Errorf("sms delivery lag samples: %d, want 1", n)
	}
}
