// Retention of ordering counters: outbox_ordering holds a row per key ever used, and a key
// whose messages were all sent needs none. The cleaning pass drops those counters.

package outbox

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/outboxgen/outboxgen/runtime/internal/store"
)

// counterBatch is how many counters one transaction of the pass checks. Each is a primary-key
// lookup, and the counter rows stay locked only while the transaction runs.
const counterBatch = 500

// dropIdleCounters deletes the counters of keys with nothing queued, in key order, batch by
// batch, and returns how many it deleted.
func dropIdleCounters(ctx context.Context, conn *sql.Conn) (int64, error) {
	var total int64
	after := ""
	for {
		keys, err := q.RetentionIdleCounters(ctx, conn, store.RetentionIdleCountersParams{AfterKey: after, Limit: counterBatch})
		if err != nil {
			return total, fmt.Errorf("retention ordering counters: %w", err)
		}
		if len(keys) == 0 {
			return total, nil
		}
		n, err := dropCounters(ctx, conn, keys, nil)
		total += n
		if err != nil {
			return total, fmt.Errorf("retention ordering counters: %w", err)
		}
		if len(keys) < counterBatch {
			return total, nil
		}
		after = keys[len(keys)-1]
	}
}

// dropCounters deletes the counters of keys that have nothing queued, in one READ COMMITTED
// transaction: it locks the counter rows (skipping those an enqueue holds), checks the queue
// for the locked keys with a locking read, and deletes the counters of the keys without
// entries. An enqueue that comes for a key meanwhile waits at its counter row until the
// transaction ends, then starts the key again at seq 1. beforeDelete, when not nil, runs
// between the check and the delete (a test's seam).
func dropCounters(ctx context.Context, conn *sql.Conn, keys []string, beforeDelete func()) (n int64, err error) {
	tx, err := conn.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return 0, err
	}
	// Rolled back on every way out but the commit, a panic in beforeDelete included: the
	// transaction holds counter rows that enqueues wait for.
	defer func() { _ = tx.Rollback() }()
	locked, err := q.RetentionLockCounters(ctx, tx, keys)
	if err != nil || len(locked) == 0 {
		return 0, err
	}
	queued, err := q.RetentionQueuedKeys(ctx, tx, locked)
	if err != nil {
		return 0, err
	}
	busy := make(map[string]bool, len(queued))
	for _, k := range queued {
		busy[k] = true
	}
	idle := locked[:0]
	for _, k := range locked {
		if !busy[k] {
			idle = append(idle, k)
		}
	}
	if beforeDelete != nil {
		beforeDelete()
	}
	if len(idle) > 0 {
		if n, err = q.RetentionDeleteCounters(ctx, tx, idle); err != nil {
			return 0, err
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, err
	}
	return n, nil
}
