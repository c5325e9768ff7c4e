package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/go-sql-driver/mysql"
)

// execReadCommitted runs one range write, such as a reclaim or a purge, in its own READ
// COMMITTED transaction. In autocommit it would run at the session's REPEATABLE READ. Its
// next-key locks on the scanned index range would also cover the gap where the application's
// new PENDING rows go, and every enqueue would wait for it. The claim runs READ COMMITTED for
// the same reason, as "The claim" in docs/design.md explains.
//
// InnoDB rolls a deadlock victim back whole, with error 1213. Running it again is the
// documented response, so execReadCommitted runs it up to maxDeadlockTries times before
// returning the error.
// A reclaim can meet such a deadlock against claims and result writes that lock the same rows in
// the other order. The retry keeps that ordinary conflict out of the error-level log.
func execReadCommitted(ctx context.Context, db *sql.DB, fn func(tx *sql.Tx) (int64, error)) (n int64, err error) {
	for try := 1; ; try++ {
		n, err = execReadCommittedOnce(ctx, db, fn)
		if err == nil || try >= maxDeadlockTries || !isDeadlock(err) || ctx.Err() != nil {
			return n, err
		}
	}
}

// maxDeadlockTries is how often execReadCommitted runs a transaction that keeps being chosen as
// a deadlock victim.
const maxDeadlockTries = 3

// erLockDeadlock is ER_LOCK_DEADLOCK, the same number on MySQL and MariaDB.
const erLockDeadlock = 1213

// isDeadlock says err is MySQL error 1213, a transaction rolled back as a deadlock victim.
func isDeadlock(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == erLockDeadlock
}

func execReadCommittedOnce(ctx context.Context, db *sql.DB, fn func(tx *sql.Tx) (int64, error)) (n int64, err error) {
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return 0, err
	}
	n, err = fn(tx)
	if err != nil {
		if rbErr := tx.Rollback(); rbErr != nil && !errors.Is(rbErr, sql.ErrTxDone) {
			err = errors.Join(err, fmt.Errorf("rollback: %w", rbErr))
		}
		return 0, err
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("commit: %w", err)
	}
	return n, nil
}
