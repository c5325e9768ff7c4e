package events_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/examples/events"
	"github.com/outboxgen/outboxgen/runtime/outbox"
	"github.com/outboxgen/outboxgen/runtime/outboxtest"
)

// The generated EnqueueX of an ordered event, given a pool and outbox.Standalone(), under
// random deadlines: a message that exists always has its ordering queue entry (else no worker
// ever claims it), and every call that returned nil has its message.
func TestStandaloneOrderedEnqueueOnAPoolIsAtomic(t *testing.T) {
	pool := outboxtest.Open(t)
	pool.SetMaxOpenConns(8)

	const calls, goroutines = 400, 8
	var next, failed atomic.Int64
	var mu sync.Mutex
	var ids []outbox.MessageID
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), uint64(time.Now().UnixNano())))
			// Deadlines from 0 to bound: 1.5 ms, grown after a failed call and shrunk after a
			// successful one, so that calls end each way about as often on a slow machine too.
			bound := 1500 * time.Microsecond
			for next.Add(1) <= calls {
				e := events.OrderPlaced{OrderID: int64(r.IntN(8)), CustomerEmail: "a@example.com", Total: events.Money{Amount: 1, Currency: events.MoneyCurrencyEUR}}
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(r.Int64N(int64(bound))))
				id, err := events.EnqueueOrderPlaced(ctx, pool, e, outbox.Standalone())
				cancel()
				if err != nil {
					failed.Add(1)
					bound += bound / 5
					continue
				}
				bound = max(1500*time.Microsecond, bound-bound/5)
				mu.Lock()
				ids = append(ids, id)
				mu.Unlock()
			}
		}(g)
	}
	wg.Wait()
	t.Logf("%d calls returned nil, %d an error", len(ids), failed.Load())
	if len(ids) == 0 || failed.Load() == 0 {
		t.Errorf("%d calls returned nil and %d an error: want some of each", len(ids), failed.Load())
	}
	// The kit reads payloads, not the ordering queue: this invariant needs its own query.
	var orphans int
	if err := pool.QueryRow(`SELECT COUNT(*) FROM outbox_messages m WHERE NOT EXISTS
		(SELECT 1 FROM outbox_ordering_queue q WHERE q.message_id = m.id)`).Scan(&orphans); err != nil {
		t.Fatal(err)
	}
	if orphans != 0 {
		t.Errorf("%d messages committed without their ordering queue entry: never delivered", orphans)
	}
	for _, id := range ids {
		if _, err := outbox.Inspect(context.Background(), pool, id); err != nil {
			t.Errorf("EnqueueOrderPlaced returned id %d: %v", id, err)
		}
	}
}
