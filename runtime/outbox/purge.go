package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/outboxgen/outboxgen/runtime/internal/store"
)

// PurgeFilter selects what Purge deletes.
type PurgeFilter struct {
	// Status is StatusSent, StatusFailed or StatusCancelled. Anything else is an error.
	// Required. A cancelled row's age counts from its cancelled_at.
	Status Status
	// OlderThan is the retention. Rows sent or failed more than OlderThan ago, by the database
	// clock, are deleted. It must be >= 0, and 0 when IDs is set. The purge scans by
	// next_attempt_at, which the runtime never sets after sent_at or failed_at. A row made
	// FAILED by hand while due in the future waits until that due time is also older than
	// OlderThan. A row without failed_at counts as failed at its due time.
	OlderThan time.Duration
	// IDs, when non-empty, deletes exactly these messages, whatever their age, if they have
	// Status. It serves an operator discarding messages that must never be delivered. At most
	// 10,000.
	IDs []MessageID
	// BatchSize is the number of rows one DELETE removes, or of ids one transaction takes. No
	// statement thus holds many row locks for long. Defaults to 1000.
	BatchSize int
	// DryRun makes Purge count the rows it would delete, and delete nothing.
	DryRun bool
}

// maxPurgeIDs bounds PurgeFilter.IDs.
const maxPurgeIDs = 10000

// Purge deletes SENT, FAILED or CANCELLED rows older than f.OlderThan, or exactly f.IDs. It deletes in
// batches of f.BatchSize, each its own short statement, until none is left or ctx is done. It
// returns the number deleted, also when it stops early with an error. With f.DryRun it returns
// the number it would delete.
func Purge(ctx context.Context, db *sql.DB, f PurgeFilter) (int64, error) {
	if db == nil {
		return 0, errors.New("outbox: Purge: nil db")
	}
	if f.Status != StatusSent && f.Status != StatusFailed && f.Status != StatusCancelled {
		return 0, fmt.Errorf("outbox: Purge: Status must be %s, %s or %s, not %q", StatusSent, StatusFailed, StatusCancelled, f.Status)
	}
	if f.OlderThan < 0 {
		return 0, fmt.Errorf("outbox: Purge: OlderThan must be >= 0, got %s", f.OlderThan)
	}
	if f.BatchSize < 0 || f.BatchSize > math.MaxInt32 {
		return 0, fmt.Errorf("outbox: Purge: BatchSize %d out of range", f.BatchSize)
	}
	if len(f.IDs) > maxPurgeIDs {
		return 0, fmt.Errorf("outbox: Purge: %d IDs, at most %d at a time", len(f.IDs), maxPurgeIDs)
	}
	if len(f.IDs) > 0 && f.OlderThan != 0 {
		return 0, errors.New("outbox: Purge: IDs and OlderThan do not combine: IDs deletes exactly those messages, whatever their age")
	}
	if f.BatchSize == 0 {
		f.BatchSize = 1000
	}
	if len(f.IDs) > 0 {
		return purgeIDs(ctx, db, f)
	}
	olderUs := f.OlderThan.Microseconds()
	if f.DryRun {
		var n int64
		var err error
		switch f.Status {
		case StatusSent:
			n, err = q.MessageCountPurgeSent(ctx, sdb(db), store.MessageCountPurgeSentParams{OlderThanUs: olderUs})
		case StatusCancelled:
			n, err = q.MessageCountPurgeCancelled(ctx, sdb(db), store.MessageCountPurgeCancelledParams{OlderThanUs: olderUs})
		default:
			n, err = q.MessageCountPurgeFailed(ctx, sdb(db), store.MessageCountPurgeFailedParams{OlderThanUs: olderUs})
		}
		if err != nil {
			return 0, fmt.Errorf("outbox: Purge %s (dry run): %w", f.Status, explain(err))
		}
		return n, nil
	}
	var total int64
	for {
		if err := ctx.Err(); err != nil {
			return total, fmt.Errorf("outbox: Purge: %w", explain(err))
		}
		var n int64
		var err error
		n, err = execReadCommitted(ctx, db, func(tx *sql.Tx) (int64, error) {
			switch f.Status {
			case StatusSent:
				return q.MessagePurgeSent(ctx, tx, store.MessagePurgeSentParams{OlderThanUs: olderUs, Limit: int32(f.BatchSize)})
			case StatusCancelled: // a cancelled message left its key's queue when it was cancelled
				return q.MessagePurgeCancelled(ctx, tx, store.MessagePurgeCancelledParams{OlderThanUs: olderUs, Limit: int32(f.BatchSize)})
			}
			n, err := q.MessagePurgeFailed(ctx, tx, store.MessagePurgeFailedParams{OlderThanUs: olderUs, Limit: int32(f.BatchSize)})
			if err != nil || n == 0 {
				return n, err
			}
			return n, releasePurged(ctx, tx)
		})
		total += n
		if err != nil {
			return total, fmt.Errorf("outbox: Purge %s: %w", f.Status, explain(err))
		}
		if n < int64(f.BatchSize) {
			return total, nil
		}
	}
}

// purgeIDs deletes exactly f.IDs that have f.Status, f.BatchSize ids per READ COMMITTED
// transaction. Each transaction locks its ids by primary key, then deletes what it locked. A
// Ctrl-C, which cancels ctx, before COMMIT rolls the batch back. Without the transaction the
// server would finish a statement the client gave up on.
func purgeIDs(ctx context.Context, db *sql.DB, f PurgeFilter) (int64, error) {
	st := store.OutboxMessagesStatus(f.Status)
	var total int64
	for start := 0; start < len(f.IDs); start += f.BatchSize {
		chunk := make([]int64, 0, f.BatchSize)
		for _, id := range f.IDs[start:min(start+f.BatchSize, len(f.IDs))] {
			chunk = append(chunk, int64(id))
		}
		if err := ctx.Err(); err != nil {
			return total, fmt.Errorf("outbox: Purge: %w", explain(err))
		}
		if f.DryRun {
			n, err := q.MessageCountPurgeIDs(ctx, sdb(db), store.MessageCountPurgeIDsParams{Status: st, Ids: chunk})
			if err != nil {
				return total, fmt.Errorf("outbox: Purge %s (dry run): %w", f.Status, explain(err))
			}
			total += n
			continue
		}
		n, err := execReadCommitted(ctx, db, func(tx *sql.Tx) (int64, error) {
			locked, err := q.MessageLockForPurge(ctx, tx, store.MessageLockForPurgeParams{Status: st, Ids: chunk})
			if err != nil || len(locked) == 0 {
				return 0, err
			}
			if err := releasePurgedIDs(ctx, tx, locked); err != nil {
				return 0, err
			}
			return q.MessageDeleteLocked(ctx, tx, locked)
		})
		total += n
		if err != nil {
			return total, fmt.Errorf("outbox: Purge %s: %w", f.Status, explain(err))
		}
	}
	return total, nil
}
