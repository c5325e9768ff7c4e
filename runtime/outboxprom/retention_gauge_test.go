package outboxprom_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/outboxgen/outboxgen/runtime/outbox"
	"github.com/outboxgen/outboxgen/runtime/outboxprom"
	"github.com/outboxgen/outboxgen/runtime/outboxtest/testdb"
)

// oldestSentGauge gathers outbox_retention_oldest_sent_seconds, -1 when absent.
func oldestSentGauge(t *testing.T, g prometheus.Gatherer) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "outbox_retention_oldest_sent_seconds" {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return -1
}

// outbox_retention_oldest_sent_seconds is 0 without a SENT row, then the age of the oldest.
func TestStatsCollectorOldestSent(t *testing.T) {
	t.Parallel()
	db := testdb.Migrated(t)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(outboxprom.NewStatsCollector(db))
	if got := oldestSentGauge(t, reg); got != 0 {
		t.Fatalf("no SENT row: gauge %v, want 0", got)
	}
	id := enqueueMessage(t, db, outbox.Message{EventType: "e", Payload: json.RawMessage(`{}`)})
	if _, err := db.Exec("UPDATE outbox_messages SET status = 'SENT', sent_at = TIMESTAMPADD(HOUR, -30, UTC_TIMESTAMP(6)), next_attempt_at = sent_at WHERE id = ?", id); err != nil {
		t.Fatal(err)
	}
	got := oldestSentGauge(t, reg)
	if want := (30 * time.Hour).Seconds(); got < want || got > want+60 {
		t.Errorf("gauge %v, want about %v (30h)", got, want)
	}
}
