// The reclaim of an ordered message an operator cancelled while it ran. The reclaim makes it
// CANCELLED, a head that never runs again, so its key goes to the key's next message in the
// same transaction, as a cancel of a PENDING message releases it.

package outbox

import (
	"context"
	"database/sql"
	"fmt"
)

// reclaimStaleTx runs one reclaim batch on tx, a READ COMMITTED transaction. The cancelled
// ordered leases are locked first, so the batch's UPDATE cannot miss one that a result write
// changes meanwhile. Those the UPDATE made CANCELLED leave the queue before the commit. One
// the UPDATE's LIMIT did not reach is still PROCESSING: OrderingQueueDeleteCancelled leaves
// its entry, and a later batch releases it.
func reclaimStaleTx(ctx context.Context, tx *sql.Tx) (int64, error) {
	cancelled, err := q.ReclaimCancelledOrderedLock(ctx, tx, reclaimBatch)
	if err != nil {
		return 0, fmt.Errorf("lock cancelled ordered leases: %w", err)
	}
	n, err := q.MessageReclaimStale(ctx, tx, reclaimBatch)
	if err != nil {
		return 0, err
	}
	return n, releaseCancelled(ctx, tx, cancelled)
}
