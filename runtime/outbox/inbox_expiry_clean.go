// The cleaner's pass over outbox_inbox: the keys Once recorded whose stored expiry has passed,
// and the keys of workers older than schema version 6, which have none and age from
// processed_at.

package outbox

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/outboxgen/outboxgen/runtime/internal/store"
)

// TableInbox names outbox_inbox in RetentionObserver.Retained: the expired keys Once recorded.
const TableInbox = "outbox_inbox"

// dropExpiredKeys deletes the expired keys, then, unless r keeps keys forever, the keys without
// an expiry whose processed_at is older than max(DefaultRetentionInbox, r.Inbox). It returns how
// many it deleted. A key's own expiry decides, whatever this worker's r says: the worker that
// recorded it knew its handler's window.
func (w *Worker) dropExpiredKeys(ctx context.Context, conn *sql.Conn, r Retention) (int64, error) {
	n, err := w.retainBatches(ctx, conn, func(ctx context.Context, tx *sql.Tx, limit int32) (int64, error) {
		return q.RetentionDeleteExpiredKeys(ctx, tx, limit)
	})
	if err != nil || keeps(r.Inbox) {
		return n, err
	}
	olderUs := max(DefaultRetentionInbox, r.Inbox).Microseconds()
	m, err := w.retainBatches(ctx, conn, func(ctx context.Context, tx *sql.Tx, limit int32) (int64, error) {
		return q.RetentionDeleteOldKeys(ctx, tx, store.RetentionDeleteOldKeysParams{OlderThanUs: olderUs, Limit: limit})
	})
	return n + m, err
}

// retainBatches runs del, one batch of at most limit deletions, each in a READ COMMITTED
// transaction on conn, until a batch deletes fewer than its limit or ctx ends. Batches are
// sized and paced as retainStatus's are. A batch under way when ctx ends finishes, within
// writeTimeout: cancelled mid-statement, the driver would close the connection, and the
// server would release the cleaning lock only once it noticed.
func (w *Worker) retainBatches(ctx context.Context, conn *sql.Conn, del func(ctx context.Context, tx *sql.Tx, limit int32) (int64, error)) (int64, error) {
	pace := newBatchPacer()
	var total int64
	for ctx.Err() == nil {
		size := pace.size
		began := time.Now()
		bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
		n, err := inReadCommitted(bctx, conn, func(tx *sql.Tx) (int64, error) { return del(bctx, tx, int32(size)) })
		cancel()
		total += n
		if err != nil {
			return total, fmt.Errorf("retention %s: %w", TableInbox, err)
		}
		if n < int64(size) {
			return total, nil
		}
		if !pace.done(ctx, time.Since(began)) {
			return total, nil
		}
	}
	return total, nil
}

// inReadCommitted runs f in a READ COMMITTED transaction on conn and commits it. At REPEATABLE
// READ a range DELETE would lock the gaps it reads, where Once inserts keys.
func inReadCommitted(ctx context.Context, conn *sql.Conn, f func(tx *sql.Tx) (int64, error)) (int64, error) {
	tx, err := conn.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback() }() // a no-op after the commit
	n, err := f(tx)
	if err != nil {
		return 0, err
	}
	if err := tx.Commit(); err != nil {
		return 0, err
	}
	return n, nil
}
