// InTx is a transaction that the package begins and commits. It can therefore wake the workers
// of its *sql.DB after the commit, or hand messages off to them.

package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// InTx runs fn in a new transaction on db. It begins, calls fn, and commits when fn returns
// nil. When fn returns an error or panics, the transaction is rolled back and the error is
// returned. A panic continues after the rollback. Nothing fn enqueued is kept.
//
// When a Worker of this process runs on the same *sql.DB, the messages fn enqueues on tx are
// delivered without waiting for a poll. Such a worker may handle the message's event type and
// have a dispatch slot free. A message with no ordering key and no Delay is then handed off to
// it. Enqueue writes the row already claimed by that worker. After the commit the worker runs
// its handler straight away, with no claim transaction. Any other message is claimed at once,
// since InTx wakes the workers after the commit.
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
		// Runs on error and on panic. A panic keeps unwinding after the rollback.
		if rbErr := tx.Rollback(); rbErr != nil && !errors.Is(rbErr, sql.ErrTxDone) && err != nil {
			err = errors.Join(err, fmt.Errorf("outbox: InTx: rollback: %w", rbErr))
		}
	}()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		if errors.Is(err, sql.ErrTxDone) {
			// fn ended the transaction itself, and its writes may well be committed. Give back
			// what was handed off and wake the workers, which is harmless if it rolled back.
			// Say so distinctly, so that a caller does not retry the whole operation and
			// enqueue twice.
			committed = true
			h.abandoned(ctx, db, true)
			running.wake(db)
			return ErrTxEnded
		}
		// A failed commit may have rolled back already. The deferred Rollback then says
		// ErrTxDone. A commit that failed may still have landed. Its handed-off rows are then
		// reclaimed after their lease.
		return fmt.Errorf("outbox: InTx: commit: %w", err)
	}
	committed = true
	if h == nil || h.committed(ctx, db) {
		running.wake(db)
	}
	return nil
}

// ErrTxEnded is returned by InTx when fn committed or rolled back the transaction itself and
// returned nil. InTx cannot tell which, and what fn wrote may be committed. Do not retry the
// operation on this error, since it would enqueue again. Fix fn to leave Commit to InTx. It
// wraps sql.ErrTxDone.
var ErrTxEnded = fmt.Errorf("outbox: InTx: fn committed or rolled back the transaction itself (its writes may be committed; do not retry): %w", sql.ErrTxDone)
