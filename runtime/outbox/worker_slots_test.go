// Dispatch slots: a claim never takes more rows than free slots, except the prefetch that fast
// handlers earn.

package outbox

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/internal/testutil"
)

// claimObserver records the largest claim and the outcomes of handled messages.
type claimObserver struct {
	NopObserver
	mu       sync.Mutex
	maxClaim int
	handled  map[Outcome]int
}

func (o *claimObserver) Claimed(n int, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.maxClaim = max(o.maxClaim, n)
}

func (o *claimObserver) Handled(_ string, out Outcome, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.handled == nil {
		o.handled = map[Outcome]int{}
	}
	o.handled[out]++
}

func TestClaimNeverExceedsFreeSlots(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	obs := &claimObserver{}
	release := make(chan struct{})
	var running, peak atomic.Int64
	r := NewRouter()
	r.Handle("slots", Policy{}, func(context.Context, json.RawMessage, Delivery) error {
		peak.Store(max(peak.Load(), running.Add(1)))
		defer running.Add(-1)
		<-release
		return nil
	})
	w := newTestWorker(t, db.DB, r, Config{Concurrency: 2, BatchSize: 100, Observer: obs})
	sig := signals(t, w)
	enqueueN(t, db.DB, "slots", 10)
	start(t, w)
	testutil.Eventually(t, 5*time.Second, "two handlers running", func() bool { return running.Load() == 2 })
	// The claim loop waits for a slot instead of claiming: nothing more is claimed until a
	// handler ends.
	sig.waitingSlots.WaitOrTimeout()
	if n := countRows(t, db, "status='PROCESSING'"); n != 2 {
		t.Fatalf("%d rows PROCESSING with 2 dispatch slots busy, want 2: a claim must not take more rows than free slots", n)
	}
	obs.mu.Lock()
	busyClaim := obs.maxClaim
	obs.mu.Unlock()
	if busyClaim > 2 {
		t.Fatalf("largest claim %d before any handler finished, want <= 2 (no handler duration known: no prefetch)", busyClaim)
	}
	close(release)
	testutil.Eventually(t, 5*time.Second, "all SENT", func() bool { return countRows(t, db, "status='SENT'") == 10 })
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if peak.Load() > 2 || obs.handled[OutcomeSent] != 10 {
		t.Fatalf("peak concurrency %d, sent %d; want <= 2, 10", peak.Load(), obs.handled[OutcomeSent])
	}
}

// Fast handlers let a claim take more rows than free slots (prefetch), so claims stay large,
// while handler concurrency still never exceeds Concurrency and each message runs once.
func TestPrefetchWithFastHandlers(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	obs := &claimObserver{}
	c := newCalls()
	var running, peak atomic.Int64
	r := NewRouter()
	r.Handle("prefetch", Policy{}, func(_ context.Context, p json.RawMessage, d Delivery) error {
		peak.Store(max(peak.Load(), running.Add(1)))
		defer running.Add(-1)
		c.add(d, p)
		return nil
	})
	w := newTestWorker(t, db.DB, r, Config{Concurrency: 2, BatchSize: 50, Observer: obs})
	ids := enqueueN(t, db.DB, "prefetch", 400)
	start(t, w)
	testutil.Eventually(t, 20*time.Second, "all SENT", func() bool { return countRows(t, db, "status='SENT'") == 400 })
	for _, id := range ids {
		if n := c.of(id); n != 1 {
			t.Fatalf("message %d handled %d times, want 1", id, n)
		}
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if peak.Load() > 2 {
		t.Fatalf("peak handler concurrency %d, want <= Concurrency 2", peak.Load())
	}
	if obs.maxClaim <= 2 {
		t.Fatalf("largest claim %d with 400 due rows and no-op handlers, want > 2 (prefetch)", obs.maxClaim)
	}
}
