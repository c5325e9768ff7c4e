package outboxprom_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/outboxgen/outboxgen/runtime/outbox"
	"github.com/outboxgen/outboxgen/runtime/outboxprom"
	"github.com/outboxgen/outboxgen/runtime/outboxtest/testdb"
)

// A paused event type shows as outbox_paused_event_type 1, and a cancelled message under
// status CANCELLED.
func TestStatsCollectorPausedAndCancelled(t *testing.T) {
	t.Parallel()
	db := testdb.Migrated(t)
	ctx := context.Background()
	id := enqueue(t, db, "welcome_email")
	if _, err := outbox.Cancel(ctx, db, outbox.Filter{IDs: []outbox.MessageID{id}}); err != nil {
		t.Fatal(err)
	}
	for _, typ := range []string{"welcome_email", "bad\xff"} {
		if err := outbox.Pause(ctx, db, typ, outbox.PauseOptions{For: time.Hour}); err == nil && typ == "bad\xff" {
			t.Fatal("Pause of a type that is not UTF-8: nil error")
		}
	}
	c := outboxprom.NewStatsCollector(db, outboxprom.WithTimeout(2*time.Second))
	want := `
# HELP outbox_messages Rows by event type and status (PENDING, PROCESSING, FAILED, CANCELLED; never SENT).
# TYPE outbox_messages gauge
outbox_messages{event_type="welcome_email",status="CANCELLED"} 1
outbox_messages{event_type="welcome_email",status="FAILED"} 0
outbox_messages{event_type="welcome_email",status="PENDING"} 0
outbox_messages{event_type="welcome_email",status="PROCESSING"} 0
# HELP outbox_paused_event_type 1 for each event type paused with outboxgen pause or outbox.Pause: no worker claims it. Alert when one stays paused longer than planned.
# TYPE outbox_paused_event_type gauge
outbox_paused_event_type{event_type="welcome_email"} 1
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "outbox_messages", "outbox_paused_event_type"); err != nil {
		t.Error(err)
	}
}
