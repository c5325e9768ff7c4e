// The latency and idle workloads: how long a message waits from commit to handler, and what an
// idle worker costs.

package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"
)

// latencyResult holds W3's numbers for one run.
type latencyResult struct {
	P50, P95, P99, TxP99 float64 // milliseconds
	Loss, Dup            int64
	N                    int            // messages
	Counts               consumerCounts // the consumer's, from the producer's start to the last delivery
	Note                 string
	Lagged               int // transactions that started more than 10 ms late (producer could not keep the rate)
}

// runLatency runs rate business transactions per second for LatencyDur while one consumer
// runs, in this process (sharing the pool, so outboxgen's InTx wakes it) or in a child process
// (xproc: no wake-up, the worker polls). Commit-to-handler latency is the time from the
// producer's commit returning to the handler's first call for that sequence number. The
// consumer's claims (watermill: polls) are counted from just before the first transaction to
// the last message's delivery (the run's tail, a few claims at most, included).
func (e runEnv) runLatency(ctx context.Context, sys system, delay time.Duration, xproc bool, rate int) (latencyResult, error) {
	var out latencyResult
	err := e.withDB(ctx, "lat", sys, func(dbName string, db *sql.DB) error {
		n := int(float64(rate) * e.sz.LatencyDur.Seconds())
		out.N = n
		tr := newTracker(n)
		var stop func() error
		var counts func() (consumerCounts, error)
		if xproc {
			dsn, err := e.srv.dsnFor(dbName, e.mode)
			if err != nil {
				return err
			}
			c, err := startChild(ctx, e.exe, sys.name(), dsn, delay, tr)
			if err != nil {
				return err
			}
			stop, counts = c.stop, c.askCounts
		} else {
			c, err := sys.consume(ctx, db, consumerConfig{HandlerDelay: delay}, tr.deliverPayload)
			if err != nil {
				return err
			}
			stop = c.stop
			counts = func() (consumerCounts, error) { return c.counts(), nil }
		}
		before, err := status(ctx, db)
		if err != nil {
			return errors.Join(err, stop())
		}
		countsBefore, err := counts()
		if err != nil {
			return errors.Join(err, stop())
		}
		commitAt := make([]int64, n)
		txDur := make([]time.Duration, n)
		interval := time.Duration(float64(time.Second) / float64(rate))
		sem := make(chan struct{}, 32)
		var wg sync.WaitGroup
		var firstErr error
		var errOnce sync.Once
		lagged := 0
		start := time.Now()
		for i := 0; i < n; i++ {
			target := start.Add(time.Duration(i) * interval)
			if d := time.Until(target); d > 0 {
				time.Sleep(d)
			} else if d < -10*time.Millisecond {
				lagged++
			}
			sem <- struct{}{}
			wg.Add(1)
			go func(seq int64) {
				defer func() { <-sem; wg.Done() }()
				t0 := time.Now()
				p := makePayload(seq, t0)
				err := sys.inTx(ctx, db, func(ctx context.Context, tx *sql.Tx) error {
					if err := insertBiz(ctx, tx, seq); err != nil {
						return err
					}
					return sys.enqueue(ctx, tx, p)
				})
				t1 := time.Now()
				if err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
				commitAt[seq] = t1.UnixNano()
				txDur[seq] = t1.Sub(t0)
			}(int64(i))
		}
		wg.Wait()
		drainErr := awaitAll(ctx, tr, sys, db, n, time.Minute+time.Duration(n)*delay)
		countsAfter, countErr := counts()
		stopErr := stop()
		if firstErr != nil {
			return errors.Join(firstErr, stopErr)
		}
		if stopErr != nil {
			return fmt.Errorf("stop consumer: %w", stopErr)
		}
		if countErr != nil {
			return countErr
		}
		out.Counts = countsAfter.minus(countsBefore)
		out.Loss, out.Dup, out.Lagged = tr.losses(), tr.dups(), lagged
		after, err := status(ctx, db)
		if err != nil {
			return errors.Join(drainErr, err)
		}
		out.Note = fmt.Sprintf("consumer: %d claims or polls (%d empty)", out.Counts.Claims, out.Counts.Empty)
		if out.Counts.Stmts >= 0 {
			out.Note += fmt.Sprintf(", %d statements", out.Counts.Stmts)
		}
		out.Note += " for " + fmt.Sprint(n) + " messages; server per message: " + perMessage(before, after, n)
		lat := make([]float64, 0, n)
		for i := 0; i < n; i++ {
			if tr.firstAt[i].Load() == 0 {
				continue // lost: counted in Loss
			}
			// InTx wakes the worker right after COMMIT, before it returns to us: the handler
			// may run before commitAt is taken. That latency is below our resolution: 0.
			d := float64(tr.firstAt[i].Load()-commitAt[i]) / 1e6
			lat = append(lat, max(d, 0))
		}
		txs := make([]float64, n)
		for i, d := range txDur {
			txs[i] = float64(d) / 1e6
		}
		out.P50, out.P95, out.P99 = pct(lat, 50), pct(lat, 95), pct(lat, 99)
		out.TxP99 = pct(txs, 99)
		return drainErr
	})
	return out, err
}

// ---- Idle: what a worker costs the database when nothing arrives ----

// idleBurst messages go through each idle consumer first, so the worker has been busy (and
// adapted its polling to traffic) before the traffic stops.
const idleBurst = 20

// idleResult is one system's idle cost.
type idleResult struct {
	ClaimsPerSec, StmtsPerSec float64
	Loss, Dup                 int64
	Note                      string
}

// runIdle starts a consumer of sys in a child process, puts idleBurst messages through it, lets
// it sit IdleWait without traffic, and counts its claims (watermill: polls) and its pool's
// statements over the next IdleWindow, per second.
func (e runEnv) runIdle(ctx context.Context, sys system) (idleResult, error) {
	var out idleResult
	err := e.withDB(ctx, "idle", sys, func(dbName string, db *sql.DB) error {
		dsn, err := e.srv.dsnFor(dbName, e.mode)
		if err != nil {
			return err
		}
		tr := newTracker(idleBurst)
		c, err := startChild(ctx, e.exe, sys.name(), dsn, 0, tr)
		if err != nil {
			return err
		}
		var runErr error
		for i := int64(0); i < idleBurst && runErr == nil; i++ {
			p := makePayload(i, time.Now())
			runErr = sys.inTx(ctx, db, func(ctx context.Context, tx *sql.Tx) error {
				if err := insertBiz(ctx, tx, i); err != nil {
					return err
				}
				return sys.enqueue(ctx, tx, p)
			})
		}
		if runErr == nil {
			runErr = awaitAll(ctx, tr, sys, db, idleBurst, time.Minute)
		}
		var c0, c1 consumerCounts
		var t0, t1 time.Time
		if runErr == nil {
			runErr = sleepCtx(ctx, e.sz.IdleWait)
		}
		if runErr == nil {
			c0, runErr = c.askCounts()
			t0 = time.Now()
		}
		if runErr == nil {
			runErr = sleepCtx(ctx, e.sz.IdleWindow)
		}
		if runErr == nil {
			c1, runErr = c.askCounts()
			t1 = time.Now()
		}
		if err := errors.Join(runErr, c.stop()); err != nil {
			return err
		}
		out.Loss, out.Dup = tr.losses(), tr.dups()
		d := c1.minus(c0)
		secs := t1.Sub(t0).Seconds()
		out.ClaimsPerSec = float64(d.Claims) / secs
		out.StmtsPerSec = float64(d.Stmts) / secs
		out.Note = fmt.Sprintf("idle %s, then over %.1f s: %d claims or polls (%d empty), %d statements",
			e.sz.IdleWait, secs, d.Claims, d.Empty, d.Stmts)
		return nil
	})
	return out, err
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// pct returns the p-th percentile (nearest rank) of xs; it sorts xs.
func pct(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	sort.Float64s(xs)
	i := int(float64(len(xs))*p/100+0.5) - 1
	return xs[max(0, min(i, len(xs)-1))]
}

// ---- Memory: peak RSS of a worker process ----
