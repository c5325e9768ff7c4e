//go:build deadlockrepro

package outbox

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"
)

// A known cycle the key's counter row cannot avoid, kept as a reproduction behind the
// deadlockrepro build tag: docs/design.md "The key's named lock" says why it remains.
//
// Two new keys that fall in one gap of the counter table, each with a first transaction that
// enqueued for it and a second that waits for the first. Both firsts roll back. Each second
// then holds the gap its key's row left, and both insert their key's row there. The seconds
// must both get through, each its key's seq 1, and neither may be a deadlock victim.
func TestOrderingNewKeysWaitersAfterRollbacks(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	// A committed key after both, so that the gap has a record on its right.
	enqueueOrdered(t, db.DB, "order_changed", "order-9", 1)
	enqueue := func(tx *sql.Tx, key string) error {
		_, err := Enqueue(ctx, tx, Message{EventType: "order_changed", Payload: []byte(`{}`), OrderingKey: key})
		return err
	}
	pool := db.Open(t)
	var firsts []*sql.Tx
	for _, key := range []string{"order-1", "order-2"} {
		tx, _ := pinnedTx(t, pool)
		if err := enqueue(tx, key); err != nil {
			t.Fatal(err)
		}
		firsts = append(firsts, tx)
	}
	var seconds []*sql.Tx
	var dones []chan error
	for _, key := range []string{"order-1", "order-2"} {
		tx, id := pinnedTx(t, pool)
		seconds = append(seconds, tx)
		done := make(chan error, 1)
		dones = append(dones, done)
		go func() { done <- enqueue(tx, key) }()
		awaitLockWait(t, db.DB, id, done)
	}
	for _, tx := range firsts {
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
	}
	// The first waiter is through now; the second may wait for it. The first then enqueues
	// for a third new key in the same gap.
	if err := <-dones[0]; err != nil {
		t.Fatalf("the waiting enqueue of order-1 after its key's first transaction rolled back: %v", err)
	}
	third := make(chan error, 1)
	go func() { third <- enqueue(seconds[0], "order-3") }()
	for i, done := range []chan error{third, dones[1]} {
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("enqueue %d: %v; the server's latest deadlock:\n%s", i, err, latestDeadlock(db.DB))
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("enqueue %d did not end", i)
		}
	}
	for _, tx := range seconds {
		_ = tx.Commit()
	}
	var seqs []string
	rows, err := db.Query("SELECT CONCAT(ordering_key, '=', ordering_seq) FROM outbox_messages ORDER BY ordering_key")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, s)
	}
	if got := fmt.Sprint(seqs); got != "[order-1=1 order-2=1 order-3=1 order-9=1]" {
		t.Errorf("seqs = %s, want [order-1=1 order-2=1 order-3=1 order-9=1]", got)
	}
}
