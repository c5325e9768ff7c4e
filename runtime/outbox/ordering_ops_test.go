package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/internal/testutil"
)

// Reclaim, fences, Retry and Purge keep working for ordered rows. These tests take the two paths
// that ordering_test.go does not: a purge by filter (not by id) and a refused result write.

// enqueueOrderedN commits one ordered message {"key": key, "n": n} with maxAttempts.
func enqueueOrderedN(t *testing.T, db *sql.DB, eventType, key string, n int64, maxAttempts int, opts ...EnqueueOption) MessageID {
	t.Helper()
	var id MessageID
	err := InTx(context.Background(), db, func(tx *sql.Tx) error {
		payload, _ := json.Marshal(orderedPayload{Key: key, N: n})
		var err error
		id, err = Enqueue(context.Background(), tx, Message{EventType: eventType, Payload: payload, OrderingKey: key, MaxAttempts: maxAttempts}, opts...)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// queued says whether message id still has its entry in outbox_ordering_queue (it holds or
// waits in its key's order).
func queued(t *testing.T, db DBTX, id MessageID) bool {
	t.Helper()
	return countQueue(t, db, id) > 0
}

// countQueue counts message id's entries in outbox_ordering_queue (0 or 1).
func countQueue(t *testing.T, db DBTX, id MessageID) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM outbox_ordering_queue WHERE message_id = ?", int64(id)).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Purge by retention (PurgeFilter without IDs) deletes a FAILED head like any FAILED row, and
// in the same transaction its queue entry (OrderingQueueCleanup): the key is released and its
// next message runs. Another key, held by a delayed PENDING head, keeps its queue and stays held.
func TestOrderingPurgeByFilterReleasesKey(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	var mu sync.Mutex
	var handled []string
	r := NewRouter()
	r.Handle("ops_purge", Policy{MaxAttempts: 1}, func(_ context.Context, raw json.RawMessage, d Delivery) error {
		var p orderedPayload
		_ = json.Unmarshal(raw, &p)
		if p.Key == "p" && p.N == 1 {
			return errors.New("provider refused the first message")
		}
		mu.Lock()
		defer mu.Unlock()
		handled = append(handled, fmt.Sprintf("%s/%d", p.Key, p.N))
		return nil
	})
	head := enqueueOrderedN(t, db.DB, "ops_purge", "p", 1, 1)
	next := enqueueOrderedN(t, db.DB, "ops_purge", "p", 2, 1)
	otherHead := enqueueOrderedN(t, db.DB, "ops_purge", "other", 1, 1, Delay(time.Hour))
	otherNext := enqueueOrderedN(t, db.DB, "ops_purge", "other", 2, 1)

	w := newTestWorker(t, db.DB, r, Config{})
	sig := signals(t, w)
	stop := start(t, w)
	defer stop()
	testutil.Eventually(t, 10*time.Second, "the head FAILED", func() bool { return statusOf(t, db, head) == "FAILED" })
	sig.awaitClaims(3) // claims enough for a wrongly released key to be claimed
	if st := statusOf(t, db, next); st != "PENDING" {
		t.Fatalf("message behind the FAILED head is %s before the purge, want PENDING", st)
	}
	s, err := Stats(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if s.HeldKeys != 2 {
		t.Fatalf("Stats.HeldKeys = %d before the purge, want 2 (p by its FAILED head, other by its delayed head): %+v", s.HeldKeys, s.Held)
	}

	// No IDs: the retention purge, every FAILED row older than 0s.
	if n, err := Purge(ctx, db.DB, PurgeFilter{Status: StatusFailed}); err != nil || n != 1 {
		t.Fatalf("Purge(FAILED, by filter) = %d, %v; want 1 (the head)", n, err)
	}
	if countQueue(t, db, head) != 0 {
		t.Errorf("the purged head's queue entry is still there: its key stays held")
	}
	testutil.Eventually(t, 10*time.Second, "the purged head's successor handled", func() bool { return statusOf(t, db, next) == "SENT" })

	s, err = Stats(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if s.HeldKeys != 1 || len(s.Held) != 1 || s.Held[0].OrderingKey != "other" || s.Held[0].Head != otherHead {
		t.Errorf("Stats after the purge: %d held %+v; want only other, held by %d", s.HeldKeys, s.Held, otherHead)
	}
	if !queued(t, db, otherHead) || !queued(t, db, otherNext) || statusOf(t, db, otherNext) != "PENDING" {
		t.Errorf("the purge touched another key's queue: other/1 queued %v, other/2 queued %v (%s)",
			queued(t, db, otherHead), queued(t, db, otherNext), statusOf(t, db, otherNext))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(handled) != 1 || handled[0] != "p/2" {
		t.Errorf("handled %v, want [p/2]", handled)
	}
}

// A SENT write refused by the fence (the head was reclaimed and claimed again, so the row
// carries a newer token) does not release the key: the head keeps its queue entry and its
// successor stays unclaimable until the newer claim records SENT.
func TestOrderingFencedSentKeepsKey(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	r := NewRouter()
	r.Handle("ops_fence", Policy{}, func(context.Context, json.RawMessage, Delivery) error { return nil })
	head := enqueueOrderedN(t, db.DB, "ops_fence", "k", 1, 5)
	next := enqueueOrderedN(t, db.DB, "ops_fence", "k", 2, 5)

	old := newTestWorker(t, db.DB, r, Config{})
	got, _, err := old.claim(ctx, 10, claimPos{})
	if err != nil || len(got) != 1 || got[0].id != head {
		t.Fatalf("first claim = ids %v, %v; want the head %d alone", claimedIDs(got), err, head)
	}
	first := got[0]
	// Its lease runs out (the worker stalled): a reclaim returns it, another worker claims it.
	db.MustExec(t, "UPDATE outbox_messages SET reclaim_after = TIMESTAMPADD(SECOND, -1, UTC_TIMESTAMP(6)) WHERE id = ?", int64(head))
	newer := newTestWorker(t, db.DB, r, Config{})
	if n, err := newer.reclaimOnce(ctx); err != nil || n != 1 {
		t.Fatalf("reclaimOnce = %d, %v; want 1", n, err)
	}
	got, _, err = newer.claim(ctx, 10, claimPos{})
	if err != nil || len(got) != 1 || got[0].id != head || got[0].token == first.token {
		t.Fatalf("second claim = ids %v, %v; want the head %d under a new token", claimedIDs(got), err, head)
	}
	second := got[0]

	// The stalled worker's handler returns: its SENT write carries the old token.
	sentBy := func(c claimed) result {
		return result{id: c.id, eventType: c.eventType, token: c.token, outcome: OutcomeSent,
			orderingKey: c.orderingKey, orderingSeq: c.orderingSeq}
	}
	written, refused, err := old.writeResultsTx(ctx, []result{sentBy(first)})
	if err != nil || written != 0 || refused != 1 {
		t.Fatalf("stale SENT write = %d written, %d refused, %v; want 0, 1 (fenced)", written, refused, err)
	}
	if row := getRow(t, db, head); row.Status != "PROCESSING" || row.ClaimToken.String != second.token {
		t.Errorf("head after the refused write: %s, token %q; want PROCESSING under the newer claim %q", row.Status, row.ClaimToken.String, second.token)
	}
	if countQueue(t, db, head) != 1 {
		t.Errorf("the refused SENT write deleted the head's queue entry: the key was released by a write that did not happen")
	}
	probe := newTestWorker(t, db.DB, r, Config{})
	if got, _, err := probe.claim(ctx, 10, claimPos{}); err != nil || len(got) != 0 {
		t.Fatalf("claim after the refused write = ids %v, %v; want nothing: message %d must wait for its head", claimedIDs(got), err, next)
	}

	// The real completion releases the key.
	written, refused, err = newer.writeResultsTx(ctx, []result{sentBy(second)})
	if err != nil || written != 1 || refused != 0 {
		t.Fatalf("SENT write of the current claim = %d written, %d refused, %v; want 1, 0", written, refused, err)
	}
	if countQueue(t, db, head) != 0 {
		t.Errorf("the head's queue entry is still there after it was recorded SENT")
	}
	got, _, err = probe.claim(ctx, 10, claimPos{})
	if err != nil || len(got) != 1 || got[0].id != next {
		t.Fatalf("claim after the head was SENT = ids %v, %v; want its successor %d", claimedIDs(got), err, next)
	}
}

func claimedIDs(got []claimed) []MessageID {
	ids := make([]MessageID, len(got))
	for i, c := range got {
		ids[i] = c.id
	}
	return ids
}
