// The reclaim of an ordered message an operator cancelled while it ran. The reclaim makes it
// CANCELLED, a head that never runs again, so its key goes to the key's next message in the
// same transaction, as a cancel of a PENDING message releases it.

package outbox

import (
	"context"
	"database/sql"
	"fmt"
)

// reclaimStaleTx runs one reclaim batch on tx, a READ COMMITTED transaction, then releases the
// keys of the ordered messages it made CANCELLED: those are among the CANCELLED ordered rows
// whose next_attempt_at the reclaim just set, which the transaction sees. Reading them after
// the UPDATE, rather than locking candidates before it, also catches a message cancelled
// between the two, and adds no lock wait to the reclaim.
func reclaimStaleTx(ctx context.Context, tx *sql.Tx) (int64, error) {
	n, err := q.MessageReclaimStale(ctx, tx, reclaimBatch)
	if err != nil || n == 0 {
		return n, err
	}
	cancelled, err := q.ReclaimCancelledOrderedIDs(ctx, tx, reclaimBatch)
	if err != nil {
		return 0, fmt.Errorf("find cancelled ordered messages: %w", err)
	}
	return n, releaseCancelled(ctx, tx, cancelled)
}
