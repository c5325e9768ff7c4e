//go:build reliability

package reliability

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/reliability/internal/ledger"
	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// Scenario 10: ordered outbox.Standalone() enqueues on a pool of 8 connections, each call under
// a random deadline of its own, while 2 workers drain. An ordered enqueue is three statements
// (the key's counter, the message, its queue entry); a deadline that lands between two of them
// must leave all or nothing. A call that returned nil is committed; one that returned an error
// is ambiguous (its commit may have landed), so the table decides. Then, on top of the usual
// checks: no message waited without its queue entry, every key's counter is its number of
// messages, the queue is empty and no key is held (Stats).
func TestEnqueueDeadlines(t *testing.T) {
	began := time.Now()
	e := newEnv(t, "enqueue_deadlines")
	calls := 3000
	if soak {
		calls = 30000
	}
	flags := baseFlags("-concurrency", "8", "-batch", "16", "-ordered")
	e.startWorker("w1", workerOpts{flags: flags})
	e.startWorker("w2", workerOpts{flags: flags})

	pool, err := sql.Open("mysql", srv.DSN("outbox", e.dbName, ""))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	pool.SetMaxOpenConns(8)
	keys := make([]string, 16)
	for i := range keys {
		keys[i] = fmt.Sprintf("%sdl%02d", orderingGroup, i)
	}

	var next, ok atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), uint64(time.Now().UnixNano())))
			// Deadlines are drawn from 0 to bound: 1.5 ms, or more where calls are slower (a
			// loaded machine). The bound grows after a call that failed and shrinks after one
			// that did not, so that calls end each way about as often and many deadlines land
			// between two statements.
			bound := 1500 * time.Microsecond
			for next.Add(1) <= int64(calls) {
				seq := e.seq.Add(1)
				key := keys[r.IntN(len(keys))]
				rec := ledger.Enqueued{Key: fmt.Sprintf("seq:%d", seq), Expect: ledger.ExpectSent, OrderingKey: key}
				payload, err := json.Marshal(map[string]any{"mode": "ok", "ms": r.IntN(5), "seq": seq, "key": key})
				if err != nil {
					t.Error(err)
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(r.Int64N(int64(bound))))
				_, err = outbox.Enqueue(ctx, pool, outbox.Message{EventType: orderedTypes[r.IntN(len(orderedTypes))],
					Payload: payload, IdempotencyKey: rec.Key, MaxAttempts: 100, OrderingKey: key}, outbox.Standalone())
				cancel()
				if err != nil {
					rec.State = ledger.Ambiguous
					e.enqErrors.Add(1)
					bound += bound / 5
				} else {
					rec.State = ledger.Committed
					ok.Add(1)
					bound = max(1500*time.Microsecond, bound-bound/5)
				}
				e.mu.Lock()
				e.enq = append(e.enq, rec)
				e.mu.Unlock()
			}
		}(g)
	}
	wg.Wait()
	enqueued := time.Since(began)

	// Before the drain: a message without its queue entry is never claimed, so the settle
	// below would only time out. Say so at once.
	var orphans int
	if err := e.db.QueryRow(`SELECT COUNT(*) FROM outbox_messages m WHERE m.status = 'PENDING'
		AND NOT EXISTS (SELECT 1 FROM outbox_ordering_queue q WHERE q.message_id = m.id)`).Scan(&orphans); err != nil {
		t.Fatal(err)
	}
	if orphans != 0 {
		t.Fatalf("%d messages committed without their ordering queue entry: PENDING forever (%d of %d calls returned nil)", orphans, ok.Load(), calls)
	}
	e.settle(settleTimeout)
	res, _, rows := e.check(false, fmt.Sprintf("%d ordered Standalone enqueues on a pool of 8 under random deadlines, %d returned nil", calls, ok.Load()))
	e.checkOrderingTables(rows, e.enqSnapshot())
	st, err := outbox.Stats(context.Background(), pool)
	if err != nil {
		t.Errorf("Stats on the enqueuers' pool: %v", err)
	} else if st.Pending != 0 || st.Processing != 0 || st.Failed != 0 || st.HeldKeys != 0 {
		t.Errorf("Stats after the drain: %+v, want nothing pending, processing, failed or held", st)
	}
	summary := fmt.Sprintf("enqueue_deadlines: %d calls in %v, %d returned nil, %d an error (%d of them committed); took %v",
		calls, enqueued.Round(100*time.Millisecond), ok.Load(), e.enqErrors.Load(), res.AmbiguousCommitted, time.Since(began).Round(100*time.Millisecond))
	t.Log(summary)
	report(summary)
	if ok.Load() == 0 || e.enqErrors.Load() == 0 {
		t.Errorf("%d calls returned nil and %d an error: the deadlines did not cut calls both ways", ok.Load(), e.enqErrors.Load())
	}
}
