package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
)

// sizes are the knobs of one run. fullSizes are the issue's; smokeSizes keep scripts/test fast.
type sizes struct {
	TxDuration   time.Duration // each L0/W1 throughput measurement
	UpdateRows   int           // rows in biz for L0's UPDATE ... WHERE id IN (100 ids)
	DrainN       int           // W2 backlog, no-op handler
	SlowN        int           // W2 backlog, 5 ms handler
	LatencyRate  int           // W3 business transactions per second
	LatencyDur   time.Duration // W3 duration (both rates)
	SporadicRate int           // W3 across processes, sporadic traffic: transactions per second
	IdleWait     time.Duration // Idle: time without traffic before the window
	IdleWindow   time.Duration // Idle: the window over which claims are counted
	MemSmall     int           // Memory: small backlog
	MemLarge     int           // Memory: large backlog
	OrderedKeys  int           // ordered: the keys W1's and the W2 drains' messages spread over
	SerialN      int           // ordered: the backlog of the drain over 1 key (serial)
	BackfillN    int           // backfill: the messages of the one transaction
	Ret          retSizes      // retention-load, history, steady (retention_common.go)
}

var fullSizes = sizes{
	TxDuration: 5 * time.Second, UpdateRows: 20000,
	DrainN: 50000, SlowN: 2000,
	LatencyRate: 300, LatencyDur: 20 * time.Second, SporadicRate: 20,
	IdleWait: 30 * time.Second, IdleWindow: 10 * time.Second,
	MemSmall: 20000, MemLarge: 200000,
	OrderedKeys: 1000, SerialN: 300,
	BackfillN: 100000,
}

var smokeSizes = sizes{
	TxDuration: 300 * time.Millisecond, UpdateRows: 1000,
	DrainN: 600, SlowN: 100,
	LatencyRate: 100, LatencyDur: time.Second, SporadicRate: 20,
	// The idle case waits far less than the 30 s, so the smoke run stays near a minute:
	// it checks that the case runs and counts, not what an idle worker costs.
	IdleWait: 3 * time.Second, IdleWindow: 2 * time.Second,
	MemSmall: 200, MemLarge: 2000,
	// Fewer keys than messages, so that every key has several and their order is checked.
	OrderedKeys: 50, SerialN: 30,
	BackfillN: 2000,
}

// slowHandler is W2's and W3's slow handler: long enough that dispatching outside the claim's
// lock, concurrently, is what decides throughput.
const slowHandler = 5 * time.Millisecond

// result is one measured number of one run.
type result struct {
	Mode     string // dsnMode name
	Workload string // e.g. "W1 tx/s, 8 goroutines"
	System   string
	Round    int
	Value    float64
	Unit     string
	Loss     int64
	Dup      int64
	Err      string // the run failed: the value is not a measurement
	Note     string // logged with the result
}

// runCheck is a variant's own check of one run (ordered, traced), on the run's database
// before it is dropped; its note goes to the log, its error fails the run.
type runCheck struct {
	// onStart: a drain's handler call begins (consumerConfig.OnStart); done: it ends, before
	// the tracker records it.
	onStart, done func(payload []byte)
	// preloaded: a drain's backlog is stored, its consumers not yet started.
	preloaded func(ctx context.Context) error
	// after: n is the committed transactions (W1) or the messages (drain).
	after func(ctx context.Context, db *sql.DB, n int64) (note string, err error)
}

// afterRun runs c.after, if any, and adds its note to r's.
func (c *runCheck) afterRun(ctx context.Context, db *sql.DB, n int64, r *result) error {
	if c == nil || c.after == nil {
		return nil
	}
	note, err := c.after(ctx, db, n)
	if note != "" {
		if r.Note != "" {
			r.Note += "; "
		}
		r.Note += note
	}
	return err
}

// isDeadlock: MySQL's ER_LOCK_DEADLOCK; the server rolled the transaction back.
func isDeadlock(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1213
}

// runEnv is what a workload needs to run once.
type runEnv struct {
	srv   server
	mode  dsnMode
	sz    sizes
	round int
	exe   string // this binary, for child processes
}

// withDB runs fn on a fresh database with sys's tables, dropping the database afterwards.
func (e runEnv) withDB(ctx context.Context, label string, sys system, fn func(dbName string, db *sql.DB) error) error {
	name, drop, err := e.srv.freshDB(ctx, label)
	if err != nil {
		return err
	}
	db, _, err := e.srv.open(name, e.mode)
	if err != nil {
		return errors.Join(err, drop())
	}
	err = sys.setup(ctx, db)
	if err == nil {
		err = fn(name, db)
	}
	return errors.Join(err, db.Close(), drop())
}

// ---- L0 and W1: business transactions per second ----

// runTx measures committed business transactions per second at conc goroutines: BEGIN;
// INSERT biz; (enqueue one message unless L0); COMMIT. Losses: committed transactions whose
// message is not stored. A transaction the server rolled back as a deadlock victim is retried
// (as an application would) and counted in the note; none is expected but with ordering keys.
func (e runEnv) runTx(ctx context.Context, sys system, conc int, chk *runCheck) (result, error) {
	res := result{Unit: "tx/s"}
	err := e.withDB(ctx, "tx", sys, func(_ string, db *sql.DB) error {
		var seq, committed, deadlocks atomic.Int64
		var firstErr error
		var errOnce sync.Once
		deadline := time.Now().Add(e.sz.TxDuration)
		start := time.Now()
		var wg sync.WaitGroup
		for g := 0; g < conc; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(deadline) {
					s := seq.Add(1) - 1
					p := makePayload(s, time.Now())
					err := sys.inTx(ctx, db, func(ctx context.Context, tx *sql.Tx) error {
						if err := insertBiz(ctx, tx, s); err != nil {
							return err
						}
						return sys.enqueue(ctx, tx, p)
					})
					if isDeadlock(err) {
						deadlocks.Add(1)
						continue
					}
					if err != nil {
						errOnce.Do(func() { firstErr = err })
						return
					}
					committed.Add(1)
				}
			}()
		}
		wg.Wait()
		elapsed := time.Since(start)
		if firstErr != nil {
			return firstErr
		}
		stored, err := sys.countMessages(ctx, db)
		if err != nil {
			return err
		}
		res.Value = float64(committed.Load()) / elapsed.Seconds()
		if d := committed.Load() - stored; d > 0 {
			res.Loss = d
		} else {
			res.Dup = -d
		}
		if d := deadlocks.Load(); d > 0 {
			res.Note = fmt.Sprintf("%d deadlock victims retried", d)
		}
		return chk.afterRun(ctx, db, committed.Load(), &res)
	})
	return res, err
}

// runUpdate is L0's write limit for a worker: autocommit UPDATE biz SET n = n + 1 WHERE id IN
// (100 ids), one connection, reported in rows/s. Claiming and recording a message are two such
// row writes, hence the target "0.8 x (rows/s / 2)".
func (e runEnv) runUpdate(ctx context.Context) (result, error) {
	res := result{Unit: "rows/s"}
	err := e.withDB(ctx, "upd", limitSystem{}, func(_ string, db *sql.DB) error {
		for done := 0; done < e.sz.UpdateRows; {
			n := min(1000, e.sz.UpdateRows-done)
			q := "INSERT INTO biz (seq, note, created_at) VALUES " +
				strings.TrimSuffix(strings.Repeat("(0, 'seed', UTC_TIMESTAMP(6)),", n), ",")
			if _, err := db.ExecContext(ctx, q); err != nil {
				return err
			}
			done += n
		}
		q := "UPDATE biz SET n = n + 1 WHERE id IN (?" + strings.Repeat(",?", 99) + ")"
		args := make([]any, 100)
		var rows int64
		next := int64(1)
		start := time.Now()
		deadline := start.Add(e.sz.TxDuration)
		for time.Now().Before(deadline) {
			for i := range args {
				args[i] = next
				next++
				if next > int64(e.sz.UpdateRows) {
					next = 1
				}
			}
			r, err := db.ExecContext(ctx, q, args...)
			if err != nil {
				return err
			}
			n, err := r.RowsAffected()
			if err != nil {
				return err
			}
			rows += n
		}
		res.Value = float64(rows) / time.Since(start).Seconds()
		return nil
	})
	return res, err
}

// preload stores n messages before any consumer runs (not measured), through the system's own
// enqueue path, on an interpolateParams pool with 4 writers so it does not dominate the run.
// A transaction rolled back as a deadlock victim is retried.
func (e runEnv) preload(ctx context.Context, dbName string, sys system, n int) error {
	db, _, err := e.srv.open(dbName, dsnMode{"preload", true})
	if err != nil {
		return err
	}
	defer db.Close()
	const batch = 500
	var next atomic.Int64
	errs := make(chan error, 4)
	for g := 0; g < 4; g++ {
		go func() {
			for {
				from := next.Add(batch) - batch
				if from >= int64(n) {
					errs <- nil
					return
				}
				to := min(from+batch, int64(n))
				ps := make([][]byte, 0, to-from)
				now := time.Now()
				for s := from; s < to; s++ {
					ps = append(ps, makePayload(s, now))
				}
				err := plainTx(ctx, db, func(tx *sql.Tx) error { return sys.enqueueBatch(ctx, tx, ps) })
				for try := 0; try < 10 && isDeadlock(err); try++ {
					err = plainTx(ctx, db, func(tx *sql.Tx) error { return sys.enqueueBatch(ctx, tx, ps) })
				}
				if err != nil {
					errs <- fmt.Errorf("preload: %w", err)
					return
				}
			}
		}()
	}
	var all error
	for g := 0; g < 4; g++ {
		all = errors.Join(all, <-errs)
	}
	return all
}

// ---- W2: drain a backlog ----

// runDrain preloads n messages, then starts `workers` consumers, each on its own pool, and
// measures n / (time until every message was handled). chk (may be nil) watches the handler
// calls and checks the database afterwards.
func (e runEnv) runDrain(ctx context.Context, sys system, workers, n int, delay time.Duration, chk *runCheck) (result, error) {
	res := result{Unit: "msg/s"}
	err := e.withDB(ctx, "drain", sys, func(dbName string, db *sql.DB) error {
		if err := e.preload(ctx, dbName, sys, n); err != nil {
			return err
		}
		if chk != nil && chk.preloaded != nil {
			if err := chk.preloaded(ctx); err != nil {
				return err
			}
		}
		tr := newTracker(n)
		before, err := status(ctx, db)
		if err != nil {
			return err
		}
		var stops []func() error
		var pools []*sql.DB
		defer func() {
			for _, p := range pools {
				p.Close()
			}
		}()
		start := time.Now()
		cpu0, heap0 := processCPU(), processHeap()
		for w := 0; w < workers; w++ {
			pool, _, err := e.srv.open(dbName, e.mode)
			if err != nil {
				return err
			}
			pools = append(pools, pool)
			cc, onMsg := consumerConfig{HandlerDelay: delay}, tr.deliverPayload
			if chk != nil && chk.onStart != nil {
				cc.OnStart = chk.onStart
			}
			if chk != nil && chk.done != nil {
				onMsg = func(p []byte) { chk.done(p); tr.deliverPayload(p) }
			}
			cons, err := sys.consume(ctx, pool, cc, onMsg)
			if err != nil {
				return err
			}
			stops = append(stops, cons.stop)
		}
		// Generous: a slow system still finishes, and its slowness shows in msg/s.
		drainErr := awaitAll(ctx, tr, sys, db, n, 2*time.Minute+time.Duration(n)*(delay+2*time.Millisecond))
		cpu, heap := processCPU()-cpu0, processHeap()
		var stopErr error
		for _, stop := range stops {
			stopErr = errors.Join(stopErr, stop())
		}
		if stopErr != nil {
			return errors.Join(drainErr, fmt.Errorf("stop consumer: %w", stopErr))
		}
		res.Loss, res.Dup = tr.losses(), tr.dups()
		after, err := status(ctx, db)
		if err != nil {
			return errors.Join(drainErr, err)
		}
		// Includes the status queries themselves and anything else on the server (use a private one).
		res.Note = "server per message: " + perMessage(before, after, n) + fmt.Sprintf("; this process's CPU per message %.1f µs (of which the collector's %.1f µs), heap allocated %.0f B, GC cycles per 1,000 messages %.1f", float64(cpu)/float64(time.Microsecond)/float64(n), (heap.gcCPU-heap0.gcCPU)*1e6/float64(n), float64(heap.bytes-heap0.bytes)/float64(n), float64(heap.cycles-heap0.cycles)*1000/float64(n))
		// Up to the last first delivery: the wait loop's polling is not the system's time.
		res.Value = float64(tr.distinct.Load()) / (float64(tr.lastAt()-start.UnixNano()) / 1e9)
		if drainErr != nil {
			return drainErr
		}
		return chk.afterRun(ctx, db, int64(n), &res)
	})
	return res, err
}

// ---- W3: latency at a steady rate ----

// runMemory preloads n messages and drains them with a worker in a child process, then reads
// the child's VmHWM (peak resident set) from /proc/PID/status. Returns MiB.
func (e runEnv) runMemory(ctx context.Context, sys system, n int) (result, error) {
	res := result{Unit: "MiB"}
	err := e.withDB(ctx, "mem", sys, func(dbName string, db *sql.DB) error {
		if err := e.preload(ctx, dbName, sys, n); err != nil {
			return err
		}
		dsn, err := e.srv.dsnFor(dbName, e.mode)
		if err != nil {
			return err
		}
		tr := newTracker(n)
		c, err := startChild(ctx, e.exe, sys.name(), dsn, 0, tr)
		if err != nil {
			return err
		}
		drainErr := awaitAll(ctx, tr, sys, db, n, 5*time.Minute+time.Duration(n)*time.Millisecond)
		hwm, herr := vmHWM(c.cmd.Process.Pid)
		stopErr := c.stop()
		res.Loss, res.Dup = tr.losses(), tr.dups()
		if err := errors.Join(herr, stopErr); err != nil {
			return err
		}
		res.Value = float64(hwm) / 1024
		return drainErr
	})
	return res, err
}

// waitDrained waits until the database records every message as done: the consumers are
// stopped only then, so neither system is judged on a batch it was about to acknowledge.
func waitDrained(ctx context.Context, sys system, db *sql.DB, n int) error {
	deadline := time.Now().Add(15 * time.Second)
	for {
		err := sys.verifyDrained(ctx, db, n)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// awaitAll waits until every message was handled and the database records them all as done.
// When the database says done but some were never handled (the system skipped them), it
// returns nil after a quiet period: those are losses, counted by the tracker, not a failure of
// the run. It errs when nothing completes within timeout.
func awaitAll(ctx context.Context, tr *tracker, sys system, db *sql.DB, n int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	lastTotal, lastChange := tr.total.Load(), time.Now()
	for {
		if tr.wait(100 * time.Millisecond) {
			return waitDrained(ctx, sys, db, n)
		}
		if t := tr.total.Load(); t != lastTotal {
			lastTotal, lastChange = t, time.Now()
		} else if time.Since(lastChange) > 3*time.Second && sys.verifyDrained(ctx, db, n) == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out with %d of %d messages handled (missing seq %v)", tr.distinct.Load(), n, tr.missing(10))
		}
	}
}
