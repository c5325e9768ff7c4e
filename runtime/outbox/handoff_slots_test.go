package outbox

import (
	"context"
	"testing"
)

// The slots a claim reserves count as free for the hand-off from the moment they are reserved,
// before the claim's transaction starts: a hand-off between the two must not find the worker
// full and leave its message PENDING for a claim.
func TestHandOffBorrowsSlotsAClaimJustReserved(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	r := NewRouter()
	r.Handle("welcome", Policy{}, make(handled, 1).handler)
	w := newTestWorker(t, db.DB, r, idleWorkerConfig(Config{Concurrency: 4}))
	start(t, w)
	waitIdle(t, w) // the claim loop now waits for a wake, with every slot free

	// What the claim loop does first when woken: reserve every free slot.
	n := w.reserve(context.Background(), false)
	if n != 4 {
		t.Fatalf("reserve took %d slots, want the 4 free", n)
	}
	gen, _, ok := w.reserveHandoff("welcome")
	if !ok {
		t.Fatal("a hand-off right after a claim reserved its slots found none free")
	}
	w.unreserveHandoff(gen)
	w.mu.Lock()
	w.claiming = 0
	w.mu.Unlock()
	w.release(n)
	waitQuiet(t, w)
}
