package main

// The producer mode (-produce-rate): this process enqueues messages of the type its own worker
// handles, through outbox.InTx on the worker's *sql.DB, so that InTx hands them off to that
// worker (runtime/outbox/handoff.go): inserted already claimed, dispatched from memory after the
// commit. A kill -9 of the process then lands between a commit and its dispatch, or in the
// middle of a handed-off call, and the suite checks that the lease and the reclaim deliver what
// the process took with it.
//
// The load is the harness's (harness_test.go, load): transactions of 1-3 messages that succeed
// after 5-65ms of work, one transaction in 8 rolled back on purpose after its enqueues. Every
// message is recorded in the ledger in two lines: an enq line before its transaction begins,
// and an enqd line with the outcome once InTx has returned. A process killed between the two
// leaves a message whose fate only the table knows: ledger.Produced makes it ambiguous.

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/outboxgen/outboxgen/reliability/internal/ledger"
	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// errRollback is what a transaction meant to roll back returns from InTx's fn.
var errRollback = errors.New("rolled back on purpose")

type producer struct {
	db         *sql.DB // the worker's: InTx hands off only to workers on the same *sql.DB
	rate       int     // messages per second, shared by the goroutines
	goroutines int
	prefix     string // of every idempotency key: prefix + "seq:N"
	// lag is a wait between InTx's return and the outcome lines: a kill -9 then lands there
	// often enough for the suite to see committed messages whose outcome was never written.
	lag    time.Duration
	log    func(ledger.Line)
	logger *slog.Logger
}

// produce runs p.goroutines enqueuers until ctx is done. A transaction in progress is not
// cut short by ctx: it ends (with its own 5s deadline) and its outcome is written first.
func produce(ctx context.Context, p producer) {
	var seq int64
	var mu sync.Mutex
	next := func() int64 {
		mu.Lock()
		defer mu.Unlock()
		seq++
		return seq
	}
	n := max(p.goroutines, 1)
	every := time.Duration(float64(time.Second) * float64(n) / float64(p.rate)) // per message and goroutine
	var wg sync.WaitGroup
	for g := 0; g < n; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), uint64(time.Now().UnixNano())))
			due := time.Now()
			for ctx.Err() == nil {
				k := 1 + r.IntN(3)
				keys := make([]string, k)
				payloads := make([]json.RawMessage, k)
				for i := range keys {
					s := next()
					keys[i] = p.prefix + "seq:" + strconv.FormatInt(s, 10)
					b, err := json.Marshal(Payload{Seq: s, Mode: "ok", MS: 5 + r.IntN(60), Prefix: p.prefix})
					if err != nil {
						panic(err) // a Payload always marshals
					}
					payloads[i] = b
				}
				p.tx(keys, payloads, r.IntN(8) == 0)
				// Paced to the rate; after a stall (a slow server) it catches up by at most a second.
				due = due.Add(time.Duration(k) * every)
				if now := time.Now(); due.Before(now.Add(-time.Second)) {
					due = now
				}
				select {
				case <-ctx.Done():
				case <-time.After(time.Until(due)):
				}
			}
		}(g)
	}
	wg.Wait()
}

// tx enqueues one transaction's messages through InTx and records their outcome: committed
// when InTx returned nil; rolled_back when fn asked for the rollback; aborted on an error before
// the commit (begin, or an Enqueue); ambiguous when fn returned nil and InTx did not, which only
// the commit can fail (the server may have committed before the connection died).
func (p producer) tx(keys []string, payloads []json.RawMessage, rollback bool) {
	for _, k := range keys {
		p.log(ledger.Line{T: ledger.KindEnqueue, Key: k, Expect: string(ledger.ExpectSent)})
	}
	// Its own deadline, as an application request's: a transaction stuck on a dead server
	// fails and the producer moves on.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	fnReturned := false
	err := outbox.InTx(ctx, p.db, func(tx *sql.Tx) error {
		for i, k := range keys {
			if _, err := outbox.Enqueue(ctx, tx, outbox.Message{EventType: EventType, Payload: payloads[i], IdempotencyKey: k, MaxAttempts: 100}); err != nil {
				return err
			}
		}
		if rollback {
			return errRollback
		}
		fnReturned = true
		return nil
	})
	var s ledger.State
	switch {
	case err == nil:
		s = ledger.Committed
	case fnReturned:
		s = ledger.Ambiguous
	case errors.Is(err, errRollback):
		s = ledger.RolledBack
	default:
		s = ledger.Aborted
	}
	if err != nil && s != ledger.RolledBack {
		p.logger.Warn("enqueue failed", "err", err, "outcome", s.String(), "messages", len(keys))
	}
	time.Sleep(p.lag)
	for _, k := range keys {
		p.log(ledger.Line{T: ledger.KindEnqueued, Key: k, Outcome: s.String()})
	}
}
