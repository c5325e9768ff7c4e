// Ordering keys after a result. A key's next message becomes its head when the queue entry of
// the present head goes. A SENT mark removes it in the transaction that records the result. A
// purge removes the entries of the messages it deletes. A FAILED head keeps its entry, and so
// holds its key until Retry or Purge.

package outbox

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/outboxgen/outboxgen/runtime/internal/store"
)

// releasesKey says r, once written, releases its ordering key to the key's next message.
func (r result) releasesKey() bool {
	return r.outcome == OutcomeSent && r.orderingKey != ""
}

// holdsOrdered says a result waiting in the sink releases an ordering key when written.
func (s *resultSink) holdsOrdered() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ordered > 0
}

// keyRelease is the set of results in one batch whose write releases their keys.
type keyRelease struct {
	count int                    // results in the batch that release a key
	ids   map[MessageID]struct{} // their messages, less those the fence refused
}

func newKeyRelease(batch []result) keyRelease {
	k := keyRelease{ids: map[MessageID]struct{}{}}
	for _, r := range batch {
		if r.releasesKey() {
			k.count++
			k.ids[r.id] = struct{}{}
		}
	}
	return k
}

// refused drops message id, whose SENT mark the fence refused. Its key is not this claim's to
// release, and the newer claim will release it.
func (k keyRelease) refused(id MessageID) { delete(k.ids, id) }

// write deletes the queue entries of the released keys' heads on db, the transaction that marks
// them SENT. The key's next message then becomes its head exactly when this one is recorded
// sent. One statement serves the batch. It finds each entry by its primary key and so never
// waits for an open enqueue's entry, as OrderingQueueDeleteSent explains. It returns how many
// keys it released.
func (k keyRelease) write(ctx context.Context, db store.DBTX, batch []result) (int, error) {
	if len(k.ids) == 0 {
		return 0, nil
	}
	ids := make([]int64, 0, len(k.ids))
	for _, r := range batch {
		if _, ok := k.ids[r.id]; ok {
			ids = append(ids, int64(r.id))
		}
	}
	if _, err := q.OrderingQueueDeleteSent(ctx, db, ids); err != nil {
		return 0, fmt.Errorf("release ordering keys: %w", err)
	}
	return len(ids), nil
}

// releasePurged deletes the queue entries left by messages a purge deleted on tx. A purged
// FAILED head thereby releases its key in the purge's transaction.
func releasePurged(ctx context.Context, tx *sql.Tx) error {
	_, err := q.OrderingQueueCleanup(ctx, tx)
	return err
}

// releasePurgedIDs deletes the queue entries of messages ids, which a purge by id deletes on
// tx. SENT messages left the queue already, so only FAILED heads release their keys here.
func releasePurgedIDs(ctx context.Context, tx *sql.Tx, ids []int64) error {
	return q.OrderingQueueDeleteMessages(ctx, tx, ids)
}
