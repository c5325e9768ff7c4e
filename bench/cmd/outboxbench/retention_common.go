// What the retention workloads (retention-load, history, steady) share: their sizes and flags, an
// outboxgen worker with a Config of the workload's own, the claim timings its Observer records,
// and a drain of a backlog preloaded after the rows already in the table. The filler is in
// retention_fill.go.

package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// retSizes are the retention workloads' sizes. fullRet are the issue's; smokeRet keep a smoke
// run of the three to about half a minute.
type retSizes struct {
	Backlog     int           // retention-load: SENT rows past Retention.Sent for the cleaner
	HistoryRows int           // history: SENT rows kept (Retention.Sent KeepForever)
	SteadyDur   time.Duration // steady: how long the producer runs
	SteadyRate  int           // steady: messages per second
	// SteadyKeep is steady's Retention.Sent, SteadyClean the worker's ReclaimInterval (the cleaner
	// runs every min(ReclaimInterval, 1m)), SteadyEvery the sampling interval.
	SteadyKeep, SteadyClean, SteadyEvery time.Duration
}

var fullRet = retSizes{
	Backlog: 1_000_000, HistoryRows: 10_000_000,
	SteadyDur: 10 * time.Minute, SteadyRate: 1000,
	SteadyKeep: 30 * time.Second, SteadyClean: 10 * time.Second, SteadyEvery: 10 * time.Second,
}

var smokeRet = retSizes{
	Backlog: 5000, HistoryRows: 20000,
	SteadyDur: 6 * time.Second, SteadyRate: 200,
	SteadyKeep: 2 * time.Second, SteadyClean: time.Second, SteadyEvery: time.Second,
}

// retentionFlags registers the retention workloads' size flags on fs; the function it returns
// sets o.sz.Ret from them once fs is parsed (after o.smoke is known).
func retentionFlags(fs *flag.FlagSet) func(o *options) {
	backlog := fs.Int("retention-backlog", 0, "retention-load: SENT rows for the cleaner to delete (default 1000000)")
	history := fs.Int("history-rows", 0, "history: SENT rows kept in the table (default 10000000)")
	steadyDur := fs.Duration("steady-dur", 0, "steady: duration of the paced producer (default 10m)")
	steadyRate := fs.Int("steady-rate", 0, "steady: messages per second (default 1000)")
	return func(o *options) {
		o.sz.Ret = fullRet
		if o.smoke {
			o.sz.Ret = smokeRet
		}
		if *backlog > 0 {
			o.sz.Ret.Backlog = *backlog
		}
		if *history > 0 {
			o.sz.Ret.HistoryRows = *history
		}
		if *steadyDur > 0 {
			o.sz.Ret.SteadyDur = *steadyDur
		}
		if *steadyRate > 0 {
			o.sz.Ret.SteadyRate = *steadyRate
		}
	}
}

// runRetentionWorkloads runs the selected retention workloads once (outboxgen only: they measure
// its cleaner and its table, next to itself).
func (b *bench) runRetentionWorkloads(ctx context.Context, e runEnv) {
	if !b.wantsAny("outboxgen", "retention-load", "history", "steady") {
		return
	}
	rec := func(workload string, r result, err error, took time.Duration) {
		r.Mode, r.Round, r.Workload, r.System = e.mode.Name, e.round, workload, "outboxgen"
		b.record(r, err, took)
	}
	if b.wants("retention-load", "outboxgen") && ctx.Err() == nil {
		e.runRetentionLoad(ctx, rec)
	}
	if b.wants("history", "outboxgen") && ctx.Err() == nil {
		e.runHistory(ctx, rec)
	}
	if b.wants("steady", "outboxgen") && ctx.Err() == nil {
		t := time.Now()
		rs, err := e.runSteady(ctx)
		took := time.Since(t)
		for _, r := range rs {
			rec(r.Workload, r, err, took)
		}
		if len(rs) == 0 {
			rec(steadyLabel(e.sz.Ret), result{Unit: "rows"}, err, took)
		}
	}
}

// recordFunc records one result of a retention workload under its label.
type recordFunc func(workload string, r result, err error, took time.Duration)

// claimTimes is a worker Observer that keeps the duration of every claim transaction that found
// rows (an empty claim at the end of a drain measures waiting, not claiming), and the rows its
// cleaning passes deleted.
type claimTimes struct {
	outbox.NopObserver
	mu       sync.Mutex
	ms       []float64 // milliseconds
	retained atomic.Int64
}

func (c *claimTimes) Claimed(n int, d time.Duration) {
	if n == 0 {
		return
	}
	c.mu.Lock()
	c.ms = append(c.ms, float64(d)/float64(time.Millisecond))
	c.mu.Unlock()
}

func (c *claimTimes) Retained(table string, n int64) {
	if table == outbox.TableMessages {
		c.retained.Add(n)
	}
}

// take returns the claim durations recorded since the last take.
func (c *claimTimes) take() []float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.ms
	c.ms = nil
	return out
}

// retWorker is one outboxgen worker with a workload's Config: cfg's Retention and
// ReclaimInterval, obs as its Observer, a no-op handler for ourType that passes each payload to
// onMsg. Its stop ends it and returns its error.
func retWorker(ctx context.Context, db *sql.DB, cfg outbox.Config, obs *claimTimes, onMsg func([]byte)) (stop func() error, err error) {
	r := outbox.NewRouter()
	r.Handle(ourType, outbox.Policy{}, func(_ context.Context, payload json.RawMessage, _ outbox.Delivery) error {
		onMsg(payload)
		return nil
	})
	cfg.Observer = obs
	cfg.BatchSize, cfg.Concurrency = oursBatch, oursConcurrency
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	w, err := outbox.NewWorker(db, r, cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	return func() error {
		cancel()
		return <-done
	}, nil
}

// drainResult is one drain of a retention workload: msg/s up to the last first delivery, and the
// claim timings.
type drainResult struct {
	rate     float64
	p50, p99 float64 // claim transactions that found rows, ms
	claims   int
	loss     int64
	dup      int64
	reads    int64 // Innodb_buffer_pool_reads over the drain (server-wide); -1 when unknown
}

// drainFrom preloads n messages (through outbox.Enqueue, as W2 does) after the rows already in
// the table, drains them with one worker of cfg, and checks that each of them was handled once
// and ends SENT. around, when set, runs as the worker starts and returns a function called
// once the drain is done (the cleaner's row count, a snapshot's age).
func (e runEnv) drainFrom(ctx context.Context, dbName string, db *sql.DB, n int, cfg outbox.Config, around func() func()) (drainResult, error) {
	var dr drainResult
	from, err := maxID(ctx, db)
	if err != nil {
		return dr, err
	}
	if err := e.preload(ctx, dbName, oursSystem{}, n); err != nil {
		return dr, err
	}
	pool, _, err := e.srv.open(dbName, e.mode)
	if err != nil {
		return dr, err
	}
	defer pool.Close()
	tr := newTracker(n)
	obs := &claimTimes{}
	var after func()
	if around != nil {
		after = around()
	}
	reads0, rerr := globalStatus(ctx, db, "Innodb_buffer_pool_reads")
	start := time.Now()
	stop, err := retWorker(ctx, pool, cfg, obs, tr.deliverPayload)
	if err != nil {
		return dr, err
	}
	drainErr := awaitAllFrom(ctx, tr, db, from, n, 2*time.Minute+time.Duration(n)*2*time.Millisecond)
	if after != nil {
		after()
	}
	if err := stop(); err != nil {
		return dr, errors.Join(drainErr, fmt.Errorf("stop worker: %w", err))
	}
	dr.reads = -1
	if reads1, err := globalStatus(ctx, db, "Innodb_buffer_pool_reads"); err == nil && rerr == nil {
		dr.reads = reads1 - reads0
	}
	dr.loss, dr.dup = tr.losses(), tr.dups()
	dr.rate = float64(tr.distinct.Load()) / (float64(tr.lastAt()-start.UnixNano()) / 1e9)
	ms := obs.take()
	dr.claims = len(ms)
	dr.p50, dr.p99 = pct(ms, 50), pct(ms, 99)
	return dr, drainErr
}

// awaitAllFrom waits until every one of the n messages after id from was handled and the table
// records them all SENT (rows before from are the workload's own and are not checked).
func awaitAllFrom(ctx context.Context, tr *tracker, db *sql.DB, from int64, n int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for !tr.wait(100 * time.Millisecond) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out with %d of %d messages handled (missing seq %v)", tr.distinct.Load(), n, tr.missing(10))
		}
	}
	deadline = time.Now().Add(15 * time.Second)
	for {
		var sent, other int64
		err := db.QueryRowContext(ctx, `SELECT COALESCE(SUM(status = 'SENT'), 0), COALESCE(SUM(status <> 'SENT'), 0)
			FROM outbox_messages WHERE id > ?`, from).Scan(&sent, &other)
		if err != nil {
			return err
		}
		if sent == int64(n) && other == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after the drain: %d of the %d messages SENT, %d not SENT", sent, n, other)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// logf writes a progress line to stderr, where the bench logs its results as they come.
func logf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", a...)
}

// retWorkloadNames run only when --only names them: at full size they take most of an hour (a
// 10-minute steady run, fills of millions of rows), which the default run of every other
// workload should not grow by.
var retWorkloadNames = []string{"retention-load", "history", "steady"}
