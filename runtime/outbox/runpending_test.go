package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/internal/testutil"
)

// RetryPending makes a message waiting for a retry's backoff due at once, with its attempts
// unchanged, and never touches a PROCESSING row.
func TestRetryPendingMakesABackedOffMessageDue(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	hold := make(chan struct{})
	delivered := make(chan MessageID, 4)
	r := NewRouter()
	r.Handle("flaky", Policy{Backoff: Backoff{Initial: time.Hour, Max: time.Hour}}, func(_ context.Context, _ json.RawMessage, d Delivery) error {
		if d.Attempt == 1 {
			return errors.New("provider down")
		}
		delivered <- d.MessageID
		return nil
	})
	r.Handle("busy", Policy{}, func(context.Context, json.RawMessage, Delivery) error {
		<-hold
		return nil
	})
	w := newTestWorker(t, db.DB, r, Config{})
	w.testSignals.init(t)
	start(t, w)
	defer close(hold)
	ids := enqueueCommitted(t, db.DB, "flaky", "busy")
	testutil.Eventually(t, 20*time.Second, "the first attempt's retry and the busy claim", func() bool {
		return getRow(t, db, ids[0]).Attempts == 1 && statusOf(t, db, ids[0]) == "PENDING" && statusOf(t, db, ids[1]) == "PROCESSING"
	})
	before := getRow(t, db, ids[0])
	if wait := before.NextAttemptAt.Sub(dbNow(t, db)); wait < 30*time.Minute {
		t.Fatalf("backed-off message due in %s, want about an hour", wait)
	}
	busy := getRow(t, db, ids[1])

	if n, err := RetryPending(ctx, db, Filter{EventType: "flaky", DryRun: true}); err != nil || n != 1 {
		t.Fatalf("dry run = %d, %v; want 1", n, err)
	}
	if got := getRow(t, db, ids[0]); got != before {
		t.Fatalf("row after the dry run %+v, want unchanged %+v", got, before)
	}
	if n, err := RetryPending(ctx, db, Filter{}); err != nil || n != 1 {
		t.Fatalf("RetryPending = %d, %v; want 1 (the PROCESSING row is not touched)", n, err)
	}
	select {
	case id := <-delivered:
		if id != ids[0] {
			t.Fatalf("delivered %d, want %d", id, ids[0])
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the backed-off message was not delivered after RetryPending")
	}
	testutil.Eventually(t, 20*time.Second, "SENT", func() bool { return statusOf(t, db, ids[0]) == "SENT" })
	if got := getRow(t, db, ids[0]); got.Attempts != 2 {
		t.Errorf("attempts after the second try = %d, want 2 (RetryPending counts none)", got.Attempts)
	}
	if got := getRow(t, db, ids[1]); got != busy {
		t.Errorf("PROCESSING row after RetryPending %+v, want unchanged %+v", got, busy)
	}
	if n, err := RetryPending(ctx, db, Filter{IDs: []MessageID{ids[0], ids[1]}}); err != nil || n != 0 {
		t.Errorf("RetryPending of a SENT and a PROCESSING row = %d, %v; want 0", n, err)
	}
	if _, err := RetryPending(ctx, db, Filter{FailedWithin: time.Hour}); err == nil {
		t.Error("RetryPending with FailedWithin: nil error, want one")
	}
}
