// The retention cleaner: a worker's maintenance goroutine deletes the SENT (and, when asked,
// FAILED) rows of its router's event types that Config.Retention no longer keeps, the ordering
// counters of keys with nothing queued (retention_counters.go) and the run ledger rows past
// their use (retention_jobs.go), and the expired Once keys (inbox_expiry_clean.go). One worker
// per database cleans at a time, under a named lock; the others skip the pass.

package outbox

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/outboxgen/outboxgen/runtime/internal/store"
)

// maxRetentionInterval bounds the time between two cleaning passes of a worker (the pass runs
// every ReclaimInterval when that is shorter).
const maxRetentionInterval = time.Minute

// retentionPass is what one cleaning pass did (the test signal's value).
type retentionPass struct {
	Locked bool  // this worker held the lock: false when another worker was cleaning
	Sent   int64 // SENT rows deleted
	Failed int64 // FAILED rows deleted
	// Counters is the ordering counters deleted (keys with nothing queued).
	Counters int64
	// JobRuns is the mysqllock run ledger rows deleted (retention_jobs.go).
	JobRuns int64
	// Inbox is the expired Once keys deleted (inbox_expiry_clean.go).
	Inbox int64
}

// retentionLoop runs a cleaning pass at start and then every min(ReclaimInterval, 1m) until ctx
// is done. It runs also when the worker keeps every message: ordering counters and the run
// ledger are cleaned whatever Retention says.
func (w *Worker) retentionLoop(ctx context.Context) {
	r := w.cfg.Retention.withDefaults()
	t := time.NewTicker(min(w.cfg.ReclaimInterval, maxRetentionInterval))
	defer t.Stop()
	down := outage{what: "retention"}
	for {
		// A table of a newer schema is not this worker's to change.
		if !w.schemaHeld() {
			p, err := w.retainOnce(ctx, r)
			if err != nil && ctx.Err() == nil {
				down.fail(ctx, w.log, err)
			} else if err == nil {
				down.ok(ctx, w.log)
			}
			if p.Sent+p.Failed+p.Counters+p.JobRuns+p.Inbox > 0 {
				w.log.LogAttrs(ctx, slog.LevelDebug, "outbox retention deleted rows",
					slog.Int64("sent", p.Sent), slog.Int64("failed", p.Failed),
					slog.Int64("ordering_counters", p.Counters), slog.Int64("job_runs", p.JobRuns), slog.Int64("inbox_keys", p.Inbox))
			}
			w.observeRetained(p)
			w.testSignals.retained.Signal(p)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// retainOnce takes the database's cleaning lock without waiting and, when it got it, deletes
// what r no longer keeps. Everything runs on one connection: the lock belongs to the session,
// and a pool limited to one connection would otherwise wait for itself.
func (w *Worker) retainOnce(ctx context.Context, r Retention) (p retentionPass, err error) {
	conn, err := w.db.Conn(ctx)
	if err != nil {
		return p, fmt.Errorf("retention: %w", err)
	}
	defer conn.Close()
	got, err := q.RetentionLock(ctx, conn)
	if err != nil {
		return p, fmt.Errorf("retention lock: %w", err)
	}
	switch {
	case len(got) != 1 || got[0] < 0:
		return p, errors.New("retention lock: the server failed GET_LOCK")
	case got[0] == 0:
		return p, nil // another worker is cleaning this database
	}
	p.Locked = true
	defer func() {
		// Released whatever happened, ctx ended included. A connection that could not release
		// it is closed instead of pooled: pooled, it would hold the lock and stop every
		// worker's cleaning for as long as it lives.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if rerr := q.RetentionUnlock(rctx, conn); rerr != nil {
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
	}()
	if !keeps(r.Sent) {
		p.Sent, err = w.retainStatus(ctx, conn, StatusSent, r.Sent)
		if err != nil {
			return p, err
		}
	}
	if !keeps(r.Failed) {
		p.Failed, err = w.retainStatus(ctx, conn, StatusFailed, r.Failed)
		if err != nil {
			return p, err
		}
	}
	if p.Counters, err = dropIdleCounters(ctx, conn); err != nil {
		return p, err
	}
	if p.Inbox, err = w.dropExpiredKeys(ctx, conn, r); err != nil {
		return p, err
	}
	p.JobRuns, err = dropOldJobRuns(ctx, conn)
	return p, err
}

// retainStatus deletes the rows of status st older than olderThan in batches until none is
// left, pausing between batches, and returns how many it deleted.
func (w *Worker) retainStatus(ctx context.Context, conn *sql.Conn, st Status, olderThan time.Duration) (int64, error) {
	olderUs := olderThan.Microseconds()
	pace := newBatchPacer()
	var total int64
	for {
		size := pace.size
		began := time.Now()
		var ids []int64
		var err error
		if st == StatusSent {
			ids, err = q.RetentionSentIDs(ctx, conn, store.RetentionSentIDsParams{OlderThanUs: olderUs, EventTypes: w.types, Limit: int32(size)})
		} else {
			ids, err = q.RetentionFailedIDs(ctx, conn, store.RetentionFailedIDsParams{OlderThanUs: olderUs, EventTypes: w.types, Limit: int32(size)})
		}
		if err != nil {
			return total, fmt.Errorf("retention %s: %w", st, err)
		}
		if len(ids) == 0 {
			return total, nil
		}
		n, err := retainDelete(ctx, conn, st, ids, olderUs)
		total += n
		if err != nil {
			return total, fmt.Errorf("retention %s: %w", st, err)
		}
		// n == 0: every row read changed before the delete; reading again would find them again.
		if len(ids) < size || n == 0 {
			return total, nil
		}
		if !pace.done(ctx, time.Since(began)) {
			return total, nil
		}
	}
}

// retainDelete deletes ids, rechecking the conditions, in a READ COMMITTED transaction: at
// REPEATABLE READ the statement's subquery would lock the queue entries and gaps it reads, and
// an enqueue of an ordered message would wait for the cleaner.
func retainDelete(ctx context.Context, conn *sql.Conn, st Status, ids []int64, olderUs int64) (n int64, err error) {
	tx, err := conn.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback() }() // a no-op after the commit
	if st == StatusSent {
		n, err = q.RetentionDeleteSent(ctx, tx, store.RetentionDeleteSentParams{Ids: ids, OlderThanUs: olderUs})
	} else {
		n, err = q.RetentionDeleteFailed(ctx, tx, store.RetentionDeleteFailedParams{Ids: ids, OlderThanUs: olderUs})
	}
	if err != nil {
		return 0, err
	}
	if err := tx.Commit(); err != nil {
		return 0, err
	}
	return n, nil
}
