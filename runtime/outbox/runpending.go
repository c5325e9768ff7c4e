// Run now: PENDING messages that wait for a retry's backoff or a Delay become due at once, for
// the moment a failing dependency is back and the backlog should drain without waiting.

package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/outboxgen/outboxgen/runtime/internal/store"
)

// RetryPending makes the PENDING messages that f selects and that are due later due now, on the
// database clock. Their attempts stay as they are, so the attempt budget still holds. PROCESSING
// and other rows are never touched. f may select by IDs and EventType. The zero Filter selects
// every waiting PENDING message. FailedSince, FailedWithin and Newest do not apply and are an
// error. An ordered message still waits for its key's head. RetryPending returns the number of
// rows changed. With f.DryRun it returns the number it would change, and changes nothing.
//
// It moves retryBatch rows per statement until none is left or ctx is done. On a *sql.DB each
// batch is its own READ COMMITTED transaction.
func RetryPending(ctx context.Context, db DBTX, f Filter) (int64, error) {
	if !f.FailedSince.IsZero() || f.FailedWithin != 0 || f.Newest {
		return 0, errors.New("outbox: RetryPending: FailedSince, FailedWithin and Newest select FAILED rows and do not apply")
	}
	a, err := f.args(ctx, db)
	if err != nil {
		return 0, fmt.Errorf("outbox: RetryPending: %w", err)
	}
	if f.DryRun {
		n, err := q.MessageCountRunPending(ctx, sdb(db), store.MessageCountRunPendingParams{
			AllIds: a.allIDs, Ids: a.ids, AnyType: a.anyType, EventType: a.eventType,
		})
		if err != nil {
			return 0, fmt.Errorf("outbox: RetryPending (dry run): %w", explain(err))
		}
		return n, nil
	}
	run := func(ids []int64) (int64, error) {
		p := store.MessageRunPendingParams{Ids: ids, AnyType: a.anyType, EventType: a.eventType}
		if pool, ok := db.(*sql.DB); ok {
			return execReadCommitted(ctx, pool, func(tx *sql.Tx) (int64, error) { return q.MessageRunPending(ctx, tx, p) })
		}
		return q.MessageRunPending(ctx, sdb(db), p)
	}
	var total int64
	if len(a.ids) > 0 {
		for start := 0; start < len(a.ids); start += retryBatch {
			if err := ctx.Err(); err != nil {
				return total, fmt.Errorf("outbox: RetryPending: %w", explain(err))
			}
			n, err := run(a.ids[start:min(start+retryBatch, len(a.ids))])
			total += n
			if err != nil {
				return total, fmt.Errorf("outbox: RetryPending: %w", explain(err))
			}
		}
		return total, nil
	}
	for {
		if err := ctx.Err(); err != nil {
			return total, fmt.Errorf("outbox: RetryPending: %w", explain(err))
		}
		cands, err := q.MessageRunPendingCandidates(ctx, sdb(db), store.MessageRunPendingCandidatesParams{
			AnyType: a.anyType, EventType: a.eventType, Limit: retryBatch,
		})
		if err != nil {
			return total, fmt.Errorf("outbox: RetryPending: %w", explain(err))
		}
		ids := make([]int64, len(cands))
		for i, c := range cands {
			ids[i] = c.ID
		}
		if len(ids) == 0 {
			return total, nil
		}
		n, err := run(ids)
		total += n
		if err != nil {
			return total, fmt.Errorf("outbox: RetryPending: %w", explain(err))
		}
		// Rows made due leave the candidates, so the next read returns the next ones. One that
		// a claim or a cancel took first is not read again either.
		if len(ids) < retryBatch {
			return total, nil
		}
	}
}
