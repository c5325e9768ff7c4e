package outbox

import (
	"context"
	"database/sql"
	"testing"
	"time"
)

// Taking a key's seq locks the key's counter row alone, never a gap beside it. Two open
// transactions enqueue for new keys that all fall in one gap of the counter table, in turns,
// and one of them also for a committed key right after that gap. No enqueue waits for the
// other transaction. A counter statement that read the row before inserting it would lock
// the gap on a new key, and these transactions would deadlock.
func TestOrderingKeysInOneGapDoNotWait(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	enqueueOrdered(t, db.DB, "order_changed", "order-5", 1)
	enqueueOrdered(t, db.DB, "order_changed", "order-9", 1)
	pool := db.Open(t)
	a, _ := pinnedTx(t, pool)
	b, _ := pinnedTx(t, pool)
	steps := []struct {
		tx  *sql.Tx
		key string
	}{{a, "order-1"}, {b, "order-2"}, {a, "order-3"}, {b, "order-4"}, {a, "order-5"}, {b, "order-4a"}, {b, "order-6"}, {a, "order-7"}}
	for _, s := range steps {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		start := time.Now()
		_, err := Enqueue(sctx, s.tx, Message{EventType: "order_changed", Payload: []byte(`{}`), OrderingKey: s.key})
		cancel()
		if err != nil {
			t.Fatalf("enqueue of %s beside the other open transaction: %v after %v", s.key, err, time.Since(start))
		}
	}
	for _, tx := range []*sql.Tx{a, b} {
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	if n := countRows(t, db, "ordering_key = 'order-5' AND ordering_seq = 2"); n != 1 {
		t.Errorf("%d messages of order-5 at seq 2, want 1", n)
	}
	if n := countRows(t, db, "ordering_seq = 1"); n != 9 {
		t.Errorf("%d messages at seq 1, want 9: one per key", n)
	}
}
