// InTx: a transaction that the package begins and commits, so that it can wake the workers of
// its *sql.DB, or hand messages off to them (handoff.go), after the commit.

package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// InTx runs fn in a new transaction on db: it begins, calls fn, and commits when fn returns
// nil. When fn returns an error or panics, the transaction is rolled back (the panic then
// continues) and the error is returned; nothing fn enqueued is kept.
//
// When a Worker of this process runs on the same *sql.DB, the messages fn enqueues on tx are
// delivered without waiting for a poll. A message of an event type such a worker handles, with
// no ordering key and no Delay, is handed off to it (while it has a dispatch slot free): Enqueue
// writes the row already claimed by that worker, and after the commit the worker runs its
// handler straight away, with no claim transaction. Any other message is claimed at once:
// InTx wakes the workers after the commit.
func InTx(ctx context.Context, db *sql.DB, fn func(tx *sql.Tx) error) (err error) {
	if db == nil {
		return errors.New("outbox: InTx: nil db")
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("outbox: InTx: begin: %w", err)
	}
	h := running.beginHandoff(db, tx)
	if h != nil {
		defer running.endHandoff(tx)
	}
	committed := false
	defer func() {
		if committed {
			return
		}
		h.abandoned(ctx, db, false)
		// Runs on error and on panic; a panic keeps unwinding after the rollback.
		if rbErr := tx.Rollback(); rbErr != nil && !errors.Is(rbErr, sql.ErrTxDone) && err != nil {
			err = errors.Join(err, fmt.Errorf("outbox: InTx: rollback: %w", rbErr))
		}
	}()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		if errors.Is(err, sql.ErrTxDone) {
			// fn ended the transaction itself. Its writes may well be committed: give back what
			// was handed off and wake the workers (harmless if it rolled back), and say so
			// distinctly, so that a caller does not retry the whole operation and enqueue twice.
			committed = true
			h.abandoned(ctx, db, true)
			running.wake(db)
			return ErrTxEnded
		}
		// A failed commit may have rolled back already; the deferred Rollback then says
		// ErrTxDone. A commit that failed after all may have landed: its handed-off rows are
		// then reclaimed after their lease.
		return fmt.Errorf("outbox: InTx: commit: %w", err)
	}
	committed = true
	if h == nil || h.committed(ctx, db) {
		running.wake(db)
	}
	return nil
}

// ErrTxEnded is returned by InTx when fn committed or rolled back the transaction itself and
// returned nil. InTx cannot tell which: what fn wrote may be committed, so do not retry the
// operation on this error (it would enqueue again); fix fn to leave Commit to InTx. It wraps
// sql.ErrTxDone.
var ErrTxEnded = fmt.Errorf("outbox: InTx: fn committed or rolled back the transaction itself (its writes may be committed; do not retry): %w", sql.ErrTxDone)
