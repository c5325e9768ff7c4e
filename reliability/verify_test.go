//go:build reliability

package reliability

import (
	"context"
	"fmt"
	"time"

	"github.com/outboxgen/outboxgen/reliability/internal/ledger"
	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// settle waits until no row of a handled type is PENDING or PROCESSING (every message reached
// SENT or FAILED), or fails after timeout with the counts.
func (e *env) settle(timeout time.Duration) {
	e.t.Helper()
	var pending, processing int
	var err error
	settled := false
	defer func() {
		if !settled {
			e.t.Logf("not settled: pending=%d processing=%d (last error %v)", pending, processing, err)
		}
	}()
	lastLog := time.Now()
	e.waitFor(timeout, "every handled message to reach SENT or FAILED", throttled(100*time.Millisecond, func() bool {
		if time.Since(lastLog) > 10*time.Second {
			e.t.Logf("settling: pending=%d processing=%d", pending, processing)
			lastLog = time.Now()
		}
		err = e.db.QueryRow(`SELECT CAST(COALESCE(SUM(status='PENDING'),0) AS SIGNED), CAST(COALESCE(SUM(status='PROCESSING'),0) AS SIGNED)
			FROM outbox_messages WHERE event_type IN (?, ?, ?)`, eventType, orderedTypes[0], orderedTypes[1]).Scan(&pending, &processing)
		settled = err == nil && pending == 0 && processing == 0
		return settled
	}))
}

// rows reads every row's final state.
func (e *env) rows() []ledger.Row {
	e.t.Helper()
	rs, err := e.db.Query(`SELECT id, idempotency_key, event_type, status, attempts, COALESCE(claim_token,''), COALESCE(last_error,''),
		COALESCE(ordering_key,''), COALESCE(ordering_seq,0)
		FROM outbox_messages ORDER BY id`)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rs.Close()
	var out []ledger.Row
	for rs.Next() {
		var r ledger.Row
		if err := rs.Scan(&r.ID, &r.Key, &r.EventType, &r.Status, &r.Attempts, &r.ClaimToken, &r.LastError, &r.OrderingKey, &r.OrderingSeq); err != nil {
			e.t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rs.Err(); err != nil {
		e.t.Fatal(err)
	}
	return out
}

func (e *env) lines() []ledger.Line {
	e.t.Helper()
	ls, torn, err := ledger.ReadDir(e.dir)
	if err != nil {
		e.t.Fatal(err)
	}
	if torn > 0 {
		e.t.Errorf("%d torn ledger line(s): a line must be one write", torn)
	}
	return ls
}

// verify stops the workers and runs the ledger and history checks; it reports the counts
// (faults describes what was injected) but fails nothing.
func (e *env) verify(allowDup bool, faults string) (ledger.Result, []ledger.Line, []ledger.Row) {
	e.t.Helper()
	e.stopAll(true)
	rows := e.rows()
	lines := e.lines()
	e.mu.Lock()
	enq := append([]ledger.Enqueued(nil), e.enq...)
	killed := e.killed
	e.mu.Unlock()
	// Messages the worker processes enqueued themselves (relworker -produce-rate) are recorded
	// in their ledgers, not in e.enq.
	produced, _, producedProblems := ledger.Produced(lines)
	enq = append(enq, produced...)
	res := ledger.Check(enq, rows, lines, allowDup)
	res.Problems = append(res.Problems, producedProblems...)
	ledgerProblems := len(res.Problems)
	ledger.CheckHistory(&res, e.history(), lines, time.Millisecond)
	historyProblems := len(res.Problems) - ledgerProblems
	// outbox.Stats, what operators read, must agree with the rows after the faults.
	st, err := outbox.Stats(context.Background(), e.db)
	if err != nil {
		e.t.Errorf("Stats: %v", err)
	} else if st.Processing != 0 || st.Stuck != 0 || st.Stale != 0 || st.Failed != int64(res.Failed) || st.Pending != int64(res.Pending) {
		res.Problems = append(res.Problems, fmt.Sprintf("outbox.Stats disagrees with the rows: %+v, rows say failed=%d pending=%d processing=0", st, res.Failed, res.Pending))
	}
	// Evidence per duplicate beyond the ledger: the worker logs each result write its fence
	// refused (the row had been reclaimed and belonged to a newer claim), and the suite knows
	// which processes it killed.
	refused := e.fenceRefusals()
	var byFence, byKill, other int
	for _, d := range res.Dups {
		switch {
		case killed[d.Proc]:
			byKill++
		case refused[fmt.Sprintf("%d/%s", d.ID, d.Token)]:
			byFence++
		default:
			other++
		}
	}
	summary := fmt.Sprintf("%s: %s (ledger %d, history %d) enqueue_errors=%d fence_refusals_logged=%d; duplicates by cause: process killed %d, write refused by the fence %d, write failed %d | faults: %s",
		e.name, res, ledgerProblems, historyProblems, e.enqErrors.Load(), len(refused), byKill, byFence, other, faults)
	e.t.Log(summary)
	report(summary)
	return res, lines, rows
}

// check is verify, failing the test on any problem.
func (e *env) check(allowDup bool, faults string) (ledger.Result, []ledger.Line, []ledger.Row) {
	e.t.Helper()
	res, lines, rows := e.verify(allowDup, faults)
	if len(res.Problems) > 0 {
		e.t.Errorf("ledger check found %d problem(s):\n%s", len(res.Problems), res.Summary(30))
	}
	if res.Committed == 0 {
		e.t.Errorf("no committed message: the scenario proved nothing")
	}
	return res, lines, rows
}
