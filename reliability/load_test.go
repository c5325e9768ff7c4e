//go:build reliability

package reliability

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/outboxgen/outboxgen/reliability/internal/ledger"
	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// spec is one message to enqueue.
type spec struct {
	Payload     any // marshalled; a json.RawMessage is used as is
	EventType   string
	MaxAttempts int
	Expect      ledger.Expect
	// OrderingKey makes the message ordered (outbox.Message.OrderingKey); enqueueTx then also
	// records its place in the key's commit order (see commitPositions).
	OrderingKey string
}

func okMsg(ms int) spec {
	return spec{Payload: map[string]any{"mode": "ok", "ms": ms}, Expect: ledger.ExpectSent, MaxAttempts: 100}
}

// enqueueTx enqueues msgs in one transaction, committed or rolled back, and records each
// message's fate: Committed when Commit returned nil, Ambiguous when Commit failed (the server
// may have committed before the connection died), RolledBack when rolled back on purpose,
// Aborted on an error before Commit. Its own transaction rather
// than InTx so that the commit error is told apart from the others exactly.
func (e *env) enqueueTx(ctx context.Context, msgs []spec, rollback bool) error {
	keys := make([]string, len(msgs))
	recs := make([]ledger.Enqueued, len(msgs))
	for i, m := range msgs {
		seq := e.seq.Add(1)
		keys[i] = fmt.Sprintf("seq:%d", seq)
		if m.Expect == "" {
			m.Expect = ledger.ExpectSent
		}
		recs[i] = ledger.Enqueued{Key: keys[i], State: ledger.RolledBack, Expect: m.Expect, OrderingKey: m.OrderingKey}
	}
	record := func(s ledger.State) {
		e.mu.Lock()
		for i := range recs {
			recs[i].State = s
			e.enq = append(e.enq, recs[i])
		}
		e.mu.Unlock()
	}
	tx, err := e.db.BeginTx(ctx, nil)
	if err != nil {
		record(ledger.Aborted) // nothing was inserted
		e.enqErrors.Add(1)
		return err
	}
	for i, m := range msgs {
		var payload json.RawMessage
		seq := strings.TrimPrefix(keys[i], "seq:")
		switch p := m.Payload.(type) {
		case json.RawMessage:
			payload = p
		case map[string]any:
			cp := map[string]any{}
			for k, v := range p {
				cp[k] = v
			}
			cp["seq"] = json.Number(seq)
			payload, err = json.Marshal(cp)
			if err != nil {
				e.t.Fatal(err)
			}
		default:
			e.t.Fatalf("spec payload %T", m.Payload)
		}
		et := m.EventType
		if et == "" {
			et = eventType
		}
		okey := m.OrderingKey
		if e.sabotage {
			okey = "" // the control: the runtime is not told the key
		}
		if _, err := outbox.Enqueue(ctx, tx, outbox.Message{EventType: et, Payload: payload,
			IdempotencyKey: keys[i], MaxAttempts: m.MaxAttempts, OrderingKey: okey}); err != nil {
			rbErr := tx.Rollback()
			record(ledger.Aborted)
			e.enqErrors.Add(1)
			if strings.Contains(err.Error(), "1213") {
				e.deadlocks.Add(1)
			}
			return errors.Join(err, rbErr)
		}
	}
	if err := e.commitPositions(ctx, tx, msgs, recs); err != nil {
		rbErr := tx.Rollback()
		record(ledger.Aborted)
		e.enqErrors.Add(1)
		return errors.Join(err, rbErr)
	}
	if rollback {
		if err := tx.Rollback(); err != nil {
			// The transaction never committed whatever Rollback says.
			e.enqErrors.Add(1)
		}
		record(ledger.RolledBack)
		return nil
	}
	if err := tx.Commit(); err != nil {
		record(ledger.Ambiguous)
		e.enqErrors.Add(1)
		return err
	}
	record(ledger.Committed)
	return nil
}

// commitPositions records, for the ordered messages of a transaction, their place in their
// key's commit order (Enqueued.Index): after the enqueues, for each key of the transaction in
// key order, it reads the key's business counter (rel_biz, see setupOrdering) under a row lock
// held until the transaction ends and adds the transaction's messages of that key to it.
// Whatever else serialises the key, that lock makes the counter the commit order: a
// transaction reads what the ones committed before it added, and a rolled-back one adds
// nothing. Within a transaction the messages keep their enqueue order.
func (e *env) commitPositions(ctx context.Context, tx *sql.Tx, msgs []spec, recs []ledger.Enqueued) error {
	count := map[string]int64{}
	for _, m := range msgs {
		if m.OrderingKey != "" {
			count[m.OrderingKey]++
		}
	}
	if len(count) == 0 {
		return nil
	}
	keys := make([]string, 0, len(count))
	for k := range count {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	base := map[string]int64{}
	for _, k := range keys {
		var n int64
		if err := tx.QueryRowContext(ctx, "SELECT n FROM rel_biz WHERE k = ? FOR UPDATE", k).Scan(&n); err != nil {
			return fmt.Errorf("business row %s: %w", k, err)
		}
		if _, err := tx.ExecContext(ctx, "UPDATE rel_biz SET n = n + ? WHERE k = ?", count[k], k); err != nil {
			return fmt.Errorf("business row %s: %w", k, err)
		}
		base[k] = n
	}
	for i, m := range msgs {
		if k := m.OrderingKey; k != "" {
			base[k]++
			recs[i].Index = base[k]
		}
	}
	return nil
}

// load runs n enqueuer goroutines until ctx is done: each transaction holds 1-3 messages from
// gen, and one in rollbackEvery transactions is rolled back. Errors are counted and the
// enqueuers keep going (a restarting server is expected to fail some of them).
func (e *env) load(ctx context.Context, n int, pause time.Duration, rollbackEvery int, gen func(r *rand.Rand) spec) *sync.WaitGroup {
	return e.enqueuers(ctx, n, pause, func(r *rand.Rand) ([]spec, bool) {
		msgs := make([]spec, 1+r.IntN(3))
		for i := range msgs {
			msgs[i] = gen(r)
		}
		return msgs, rollbackEvery > 0 && r.IntN(rollbackEvery) == 0
	})
}

// enqueuers runs n goroutines until ctx is done, each enqueueing the messages of tx in one
// transaction, committed or rolled back as tx says, then pausing, and again.
func (e *env) enqueuers(ctx context.Context, n int, pause time.Duration, tx func(r *rand.Rand) (msgs []spec, rollback bool)) *sync.WaitGroup {
	var wg sync.WaitGroup
	for g := 0; g < n; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), uint64(time.Now().UnixNano())))
			for ctx.Err() == nil {
				msgs, rollback := tx(r)
				// A short per-transaction deadline: a transaction stuck on a dead server fails
				// and the enqueuer moves on, as an application request would.
				tctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_ = e.enqueueTx(tctx, msgs, rollback) // counted in enqErrors
				cancel()
				pace(ctx, pause)
			}
		}(g)
	}
	return &wg
}

// pace waits d or until ctx is done: the rhythm of a load or fault generator, not a wait for
// something to happen.
func pace(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
