package outboxotel_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/runtime/outbox"
	"github.com/outboxgen/outboxgen/runtime/outboxotel"
	"github.com/outboxgen/outboxgen/runtime/outboxtest/testdb"
)

// outboxgen.retention.oldest_sent.age is 0 without a SENT row, then the age of the oldest.
func TestStatsGaugeOldestSent(t *testing.T) {
	t.Parallel()
	db := testdb.Migrated(t)
	m := newMetrics(t)
	if _, err := outboxotel.RegisterStats(db, outboxotel.WithMeterProvider(m.mp)); err != nil {
		t.Fatal(err)
	}
	if v, n := point(m.mustCollect(t)["outboxgen.retention.oldest_sent.age"], nil); v != 0 || n != 1 {
		t.Fatalf("no SENT row: %v (%d points), want 0", v, n)
	}
	id, err := outbox.Enqueue(t.Context(), db, outbox.Message{EventType: "e", Payload: json.RawMessage(`{}`)}, outbox.Standalone())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("UPDATE outbox_messages SET status = 'SENT', sent_at = TIMESTAMPADD(HOUR, -30, UTC_TIMESTAMP(6)), next_attempt_at = sent_at WHERE id = ?", id); err != nil {
		t.Fatal(err)
	}
	v, _ := point(m.mustCollect(t)["outboxgen.retention.oldest_sent.age"], nil)
	if want := (30 * time.Hour).Seconds(); v < want || v > want+60 {
		t.Errorf("gauge %v, want about %v (30h)", v, want)
	}
}
