// Ordering keys at enqueue. An ordered message takes a seq on its enqueuing transaction, and a
// queue entry puts it in its key's order. The release of a key's next message is in
// ordering_release.go. Held keys are in ordering_held.go, and broken keys in
// ordering_broken.go.

package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/outboxgen/outboxgen/runtime/internal/store"
)

// enqueueSeq is the first ordered step of an enqueue. It takes m's seq in its key's order,
// before the message's INSERT. It is 0 for an unordered message.
func enqueueSeq(ctx context.Context, tx DBTX, m Message) (int64, error) {
	if m.OrderingKey == "" {
		return 0, nil
	}
	// The key's next seq, its counter row locked until the caller's transaction ends.
	seq, err := nextSeq(ctx, tx, m.OrderingKey)
	if err != nil {
		return 0, fmt.Errorf("outbox: Enqueue %q: ordering key: %w", m.EventType, explain(err))
	}
	return seq, nil
}

// enqueueQueueEntry is the last ordered step of an enqueue. It writes the queue entry of
// message id at seq, on the same tx as the message. It does nothing for an unordered message.
func enqueueQueueEntry(ctx context.Context, tx DBTX, m Message, seq, id int64) error {
	if m.OrderingKey == "" {
		return nil
	}
	err := q.OrderingQueueInsert(ctx, sendDB(tx), store.OrderingQueueInsertParams{OrderingKey: m.OrderingKey, Seq: seq, MessageID: id})
	if err != nil {
		return fmt.Errorf("outbox: Enqueue %q: ordering queue: %w", m.EventType, explain(err))
	}
	return nil
}

// nextSeq takes key's next seq on tx and leaves the key's counter row locked until tx ends. A
// second transaction enqueueing for the key waits there. It takes the following seq once the
// first commits, or the same one if the first rolls back.
//
// The counter statement runs under the key's named lock, so that one session at a time waits
// in it. The named lock waits at most a second, and then the statement runs without it.
// "The key's named lock" in docs/design.md says why.
func nextSeq(ctx context.Context, tx DBTX, key string) (int64, error) {
	return underKeyLock(ctx, tx, key, func() (int64, error) {
		return q.OrderingNext(ctx, sendDB(tx), key)
	})
}

// underKeyLock runs counter, a statement on key's counter row, under key's named lock. The lock
// is released afterwards, whatever happened.
func underKeyLock(ctx context.Context, tx DBTX, key string, counter func() (int64, error)) (_ int64, err error) {
	// A named lock belongs to a session. On a pool, one pinned connection takes and releases it.
	lockDB := sendDB(tx)
	if pool, ok := tx.(interface {
		Conn(context.Context) (*sql.Conn, error)
	}); ok {
		conn, err := pool.Conn(ctx)
		if err != nil {
			return 0, err
		}
		defer conn.Close()
		lockDB = inlineExec{conn}
	}
	got, err := q.OrderingKeyLock(ctx, lockDB, key)
	if err != nil {
		return 0, fmt.Errorf("key lock: %w", err)
	}
	switch {
	case len(got) != 1 || got[0] < 0:
		return 0, errors.New("key lock: the server failed GET_LOCK")
	case got[0] == 1:
		defer func() {
			// Released whatever happened, ctx ended included; a session that is gone has
			// released it already.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if rerr := q.OrderingKeyUnlock(rctx, lockDB, key); rerr != nil && err == nil {
				err = fmt.Errorf("key lock: release: %w", rerr)
			}
		}()
	}
	return counter()
}
