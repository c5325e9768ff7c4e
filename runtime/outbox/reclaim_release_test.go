package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"testing"
	"time"
)

// An ordered message cancelled while it ran, whose worker then died, releases its key when the
// reclaim makes it CANCELLED: the key's next message is claimable at once, with no broken key
// left for the repair.
func TestCancelledRunningOrderedReclaimReleasesKey(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	r := NewRouter()
	r.Handle("o", Policy{Timeout: 50 * time.Millisecond}, func(context.Context, json.RawMessage, Delivery) error { return nil })
	w := newTestWorker(t, db.DB, r, Config{StaleAfter: 200 * time.Millisecond})
	var ids []MessageID
	err := InTx(ctx, db.DB, func(tx *sql.Tx) error {
		for i := 0; i < 2; i++ {
			id, err := Enqueue(ctx, tx, Message{EventType: "o", Payload: json.RawMessage(`{}`), OrderingKey: "k"})
			if err != nil {
				return err
			}
			ids = append(ids, id)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, _, err := w.claim(ctx, 2, claimPos{}); err != nil || len(got) != 1 || got[0].id != ids[0] {
		t.Fatalf("claim = %v, %v; want the head alone", got, err)
	}
	if n, err := Cancel(ctx, db, Filter{IDs: []MessageID{ids[0]}}); err != nil || n != 1 {
		t.Fatalf("Cancel of the running head = %d, %v; want 1", n, err)
	}
	awaitLeaseExpired(t, db.DB, ids[0])
	if n, err := w.reclaimOnce(ctx); err != nil || n != 1 {
		t.Fatalf("reclaimOnce = %d, %v; want 1", n, err)
	}
	if st := statusOf(t, db, ids[0]); st != "CANCELLED" {
		t.Fatalf("reclaimed head is %s, want CANCELLED", st)
	}
	var queued int
	if err := db.QueryRow("SELECT COUNT(*) FROM outbox_ordering_queue WHERE message_id = ?", ids[0]).Scan(&queued); err != nil || queued != 0 {
		t.Fatalf("the reclaimed cancelled head keeps %d queue entries (%v), want 0", queued, err)
	}
	if s, err := Stats(ctx, db); err != nil || s.BrokenKeys != 0 {
		t.Errorf("Stats = %+v, %v; want no broken key", s, err)
	}
	if got, _, err := w.claim(ctx, 2, claimPos{}); err != nil || len(got) != 1 || got[0].id != ids[1] {
		t.Errorf("claim after the reclaim = %v, %v; want the key's next message", got, err)
	}
}
