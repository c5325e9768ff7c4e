package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/internal/testutil"
)

// An idle worker backs off to PollInterval: after a few empty claims it costs the database one
// claim per PollInterval, not one per MinPollInterval.
func TestIdleWorkerBacksOffToPollInterval(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	r := NewRouter()
	r.Handle("idle", Policy{}, func(context.Context, json.RawMessage, Delivery) error { return nil })
	w := newTestWorker(t, db.DB, r, Config{PollInterval: 300 * time.Millisecond, MinPollInterval: 5 * time.Millisecond})
	sig := signals(t, w)
	stop := start(t, w)
	defer stop()
	// 5, 10, 20, 40, 80, 160 ms, then 300 ms: the ramp is over after 7 empty claims.
	for range 7 {
		sig.claimed.WaitOrTimeout()
	}
	began := time.Now()
	for range 3 {
		sig.claimed.WaitOrTimeout()
	}
	// At PollInterval, 3 claims take 900ms; at MinPollInterval they would take 15ms.
	if took := time.Since(began); took < 600*time.Millisecond {
		t.Errorf("an idle worker made 3 claims in %s with PollInterval 300ms, want about 900ms", took)
	}
}

// Messages that keep arriving from another process (no Wake reaches the worker) are claimed
// MinPollInterval after each other, not a PollInterval later.
func TestSteadyTrafficFromAnotherProcessIsNotPollBound(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	var mu sync.Mutex
	handledAt := map[MessageID]time.Time{}
	r := NewRouter()
	r.Handle("steady", Policy{}, func(_ context.Context, _ json.RawMessage, d Delivery) error {
		mu.Lock()
		handledAt[d.MessageID] = time.Now()
		mu.Unlock()
		return nil
	})
	// PollInterval 4 s: a message waiting for the next full poll would be seconds late.
	w := newTestWorker(t, db.DB, r, Config{PollInterval: 4 * time.Second, MinPollInterval: 20 * time.Millisecond})
	stop := start(t, w)
	defer stop()
	producer := db.Open(t) // another pool: InTx on it wakes no worker, as in another process
	committed := map[MessageID]time.Time{}
	every := time.NewTicker(25 * time.Millisecond) // the traffic's pace: one message per 25ms
	defer every.Stop()
	for i := 0; i < 60; i++ {
		var id MessageID
		err := InTx(context.Background(), producer, func(tx *sql.Tx) error {
			var err error
			id, err = Enqueue(context.Background(), tx, Message{EventType: "steady", Payload: json.RawMessage(`{}`)})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		committed[id] = time.Now()
		<-every.C
	}
	testutil.Eventually(t, 10*time.Second, "all handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(handledAt) == len(committed)
	})
	mu.Lock()
	defer mu.Unlock()
	late := 0
	for id, at := range committed {
		if handledAt[id].Sub(at) > time.Second {
			late++
		}
	}
	// Only the first message may wait for a poll from the worker's idle state.
	if late > 1 {
		t.Errorf("%d of %d steadily arriving messages were handled more than 1 s after commit (PollInterval 4s, MinPollInterval 20ms)", late, len(committed))
	}
}

// A stream of InTx commits wakes the worker after each one; the wakes share claims instead of
// costing a claim transaction per message.
func TestWakesAreCoalesced(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	var mu sync.Mutex
	handled := 0
	r := NewRouter()
	r.Handle("wake", Policy{}, func(context.Context, json.RawMessage, Delivery) error {
		mu.Lock()
		handled++
		mu.Unlock()
		return nil
	})
	w := newTestWorker(t, db.DB, r, Config{PollInterval: time.Minute})
	sig := signals(t, w)
	stop := start(t, w)
	defer stop()
	sig.claimed.WaitOrTimeout() // the first, empty claim
	before := w.claims.Load()
	const producers, each = 8, 40
	var wg sync.WaitGroup
	for range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				err := InTx(context.Background(), db.DB, func(tx *sql.Tx) error {
					_, err := Enqueue(context.Background(), tx, Message{EventType: "wake", Payload: json.RawMessage(`{}`)})
					return err
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	testutil.Eventually(t, 10*time.Second, "all handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return handled == producers*each
	})
	claims := w.claims.Load() - before
	if ratio := float64(claims) / (producers * each); ratio > 0.5 {
		t.Errorf("%d claims for %d woken messages (%.2f per message), want wakes to share claims", claims, producers*each, ratio)
	}
	t.Logf("%d claims for %d messages", claims, producers*each)
}
