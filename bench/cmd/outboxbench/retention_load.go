// The retention-load workload: what the cleaner deleting a large SENT backlog costs the drain
// and the business transaction, against the same backlog with the cleaner off and against an
// empty table, all in one round.

package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// retVariant is one of the three tables a retention-load measurement runs on.
type retVariant int

const (
	retCleaning retVariant = iota // the backlog, past Retention.Sent: the cleaner deletes it meanwhile
	retKept                       // the same backlog, Retention.Sent KeepForever: the cleaner deletes nothing
	retEmpty                      // no backlog, the default Retention
)

// backlogAge is how long ago the backlog's rows were sent: past the default Retention.Sent (a
// day), so the default Config's cleaner deletes them.
const backlogAge = 48 * time.Hour

func (v retVariant) String(backlog int) string {
	switch v {
	case retCleaning:
		return fmt.Sprintf("cleaner deleting a %d-row SENT backlog", backlog)
	case retKept:
		return fmt.Sprintf("same %d-row backlog, cleaner off (Retention.Sent KeepForever)", backlog)
	}
	return "empty table"
}

// retention is the worker's Retention in variant v: the default (SENT rows kept a day, so the
// backlog sent two days ago is due) or KeepForever.
func (v retVariant) retention() outbox.Retention {
	if v == retKept {
		return outbox.Retention{Sent: outbox.KeepForever}
	}
	return outbox.Retention{}
}

func retLoadDrainLabel(sz sizes, v retVariant) string {
	return fmt.Sprintf("Retention load: W2 drain %d, no-op, 1 worker, %s", sz.DrainN, v.String(sz.Ret.Backlog))
}

func retLoadTxLabel(sz sizes, conc int, v retVariant) string {
	return fmt.Sprintf("Retention load: W1 tx/s, %d goroutine(s), worker running, %s", conc, v.String(sz.Ret.Backlog))
}

// runRetentionLoad measures, in each of the three variants, the W2 no-op drain of DrainN with
// one worker and W1 at 1 and 8 goroutines with one worker running (the worker whose cleaner
// runs; with the cleaner off it still drains W1's messages, so the two differ only by the
// cleaner). Each measurement gets a fresh database and a fresh backlog. With the cleaner on,
// it also records the backlog rows deleted during the measurement and their rate.
func (e runEnv) runRetentionLoad(ctx context.Context, rec recordFunc) {
	for _, v := range []retVariant{retCleaning, retKept, retEmpty} {
		t := time.Now()
		var cl cleanerCount
		r, err := e.retLoadDrain(ctx, v, &cl)
		label := retLoadDrainLabel(e.sz, v)
		rec(label, r, err, time.Since(t))
		if v == retCleaning {
			cl.record(rec, label, err)
		}
	}
	for _, conc := range []int{1, 8} {
		for _, v := range []retVariant{retCleaning, retKept, retEmpty} {
			t := time.Now()
			var cl cleanerCount
			r, err := e.retLoadTx(ctx, v, conc, &cl)
			label := retLoadTxLabel(e.sz, conc, v)
			rec(label, r, err, time.Since(t))
			if v == retCleaning {
				cl.record(rec, label, err)
			}
		}
	}
}

// cleanerCount is the backlog rows the cleaner deleted during one measurement.
type cleanerCount struct {
	deleted int64
	over    time.Duration
	left    int64 // backlog rows left at the end: 0 means the cleaner finished early
	err     error // counting failed
}

func (c cleanerCount) record(rec recordFunc, label string, err error) {
	if err != nil {
		return
	}
	if c.err != nil {
		rec(label+", rows the cleaner deleted", result{Unit: "rows"}, c.err, 0)
		return
	}
	note := fmt.Sprintf("%d backlog rows left at the end", c.left)
	if c.left == 0 {
		note += ": the cleaner finished before the measurement did, so the rate is a lower bound"
	}
	rec(label+", rows the cleaner deleted", result{Unit: "rows", Value: float64(c.deleted), Note: note}, nil, 0)
	rec(label+", cleaner rate", result{Unit: "rows/s", Value: float64(c.deleted) / c.over.Seconds()}, nil, 0)
}

// withBacklog runs fn on a fresh database holding the variant's backlog (none when empty);
// first and last are the backlog's ids.
func (e runEnv) withBacklog(ctx context.Context, v retVariant, fn func(dbName string, db *sql.DB, first, last int64) error) error {
	return e.withDB(ctx, "retload", oursSystem{}, func(dbName string, db *sql.DB) error {
		var first, last int64
		if v != retEmpty {
			t := time.Now()
			var err error
			if first, err = fillRows(ctx, db, e.sz.Ret.Backlog, "SENT", backlogAge); err != nil {
				return err
			}
			if last, err = maxID(ctx, db); err != nil {
				return err
			}
			logf("  retention-load: filled %d SENT rows in %.1fs", e.sz.Ret.Backlog, time.Since(t).Seconds())
		}
		return fn(dbName, db, first, last)
	})
}

// countCleaner returns, for the cleaning variant, a function to call as the measurement starts
// and one to call as it ends, which fill cl. With wait, begin returns only once the cleaner has
// deleted its first rows (the worker was started just before), so that the measurement runs
// while it deletes.
func countCleaner(ctx context.Context, db *sql.DB, v retVariant, first, last int64, cl *cleanerCount, wait bool) (begin func() error, end func()) {
	var n0 int64
	var t0 time.Time
	var err error
	begin = func() error {
		if v != retCleaning {
			return nil
		}
		n0, err = countRange(ctx, db, first, last)
		for deadline := time.Now().Add(time.Minute); wait && err == nil; {
			var n int64
			if n, err = countRange(ctx, db, first, last); err != nil || n < n0 {
				n0 = n
				break
			}
			if time.Now().After(deadline) {
				err = fmt.Errorf("the cleaner deleted none of the %d backlog rows within a minute of the worker's start", n0)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		t0 = time.Now()
		return err
	}
	end = func() {
		if v != retCleaning {
			return
		}
		defer func() { cl.err = err }()
		if err != nil {
			return
		}
		over := time.Since(t0)
		var n1 int64
		if n1, err = countRange(ctx, db, first, last); err == nil {
			cl.deleted, cl.over, cl.left = n0-n1, over, n1
		}
	}
	return begin, end
}

func (e runEnv) retLoadDrain(ctx context.Context, v retVariant, cl *cleanerCount) (result, error) {
	res := result{Unit: "msg/s"}
	err := e.withBacklog(ctx, v, func(dbName string, db *sql.DB, first, last int64) error {
		// The count at the start is taken before the worker starts, so it is the whole backlog.
		// The drain and the cleaner start together, with the worker: the count at the start is
		// taken just before, so it is the whole backlog.
		begin, end := countCleaner(ctx, db, v, first, last, cl, false)
		dr, err := e.drainFrom(ctx, dbName, db, e.sz.DrainN, outbox.Config{Retention: v.retention()}, func() func() {
			_ = begin() // without wait, its error is end's
			return end
		})
		res.Value, res.Loss, res.Dup = dr.rate, dr.loss, dr.dup
		res.Note = fmt.Sprintf("claim p50 %.2f ms, p99 %.2f ms over %d claims", dr.p50, dr.p99, dr.claims)
		return err
	})
	return res, err
}

// retLoadTx runs W1 (BEGIN; INSERT biz; Enqueue; COMMIT through outbox.InTx) at conc goroutines
// for TxDuration while one worker runs on the database. Losses: committed transactions whose
// message is not stored.
func (e runEnv) retLoadTx(ctx context.Context, v retVariant, conc int, cl *cleanerCount) (result, error) {
	res := result{Unit: "tx/s"}
	err := e.withBacklog(ctx, v, func(dbName string, db *sql.DB, first, last int64) error {
		from, err := maxID(ctx, db)
		if err != nil {
			return err
		}
		begin, end := countCleaner(ctx, db, v, first, last, cl, true)
		pool, _, err := e.srv.open(dbName, e.mode)
		if err != nil {
			return err
		}
		defer pool.Close()
		stop, err := retWorker(ctx, pool, outbox.Config{Retention: v.retention()}, &claimTimes{}, func([]byte) {})
		if err != nil {
			return err
		}
		if err := begin(); err != nil {
			return errors.Join(err, stop())
		}
		committed, elapsed, txErr := txLoop(ctx, db, conc, e.sz.TxDuration)
		end()
		if err := stop(); err != nil {
			return fmt.Errorf("stop worker: %w", err)
		}
		if txErr != nil {
			return txErr
		}
		res.Value = float64(committed) / elapsed.Seconds()
		var stored int64
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM outbox_messages WHERE id > ?", from).Scan(&stored); err != nil {
			return err
		}
		if d := committed - stored; d > 0 {
			res.Loss = d
		} else {
			res.Dup = -d
		}
		return nil
	})
	return res, err
}

// txLoop is W1's loop on db: conc goroutines commit business transactions that enqueue one
// message each, through outbox.InTx, for dur.
func txLoop(ctx context.Context, db *sql.DB, conc int, dur time.Duration) (int64, time.Duration, error) {
	var seq, committed atomic.Int64
	var firstErr error
	var once sync.Once
	sys := oursSystem{}
	start := time.Now()
	deadline := start.Add(dur)
	var wg sync.WaitGroup
	for g := 0; g < conc; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) && ctx.Err() == nil {
				s := seq.Add(1) - 1
				p := makePayload(s, time.Now())
				err := sys.inTx(ctx, db, func(ctx context.Context, tx *sql.Tx) error {
					if err := insertBiz(ctx, tx, s); err != nil {
						return err
					}
					return sys.enqueue(ctx, tx, p)
				})
				if err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				committed.Add(1)
			}
		}()
	}
	wg.Wait()
	return committed.Load(), time.Since(start), firstErr
}
