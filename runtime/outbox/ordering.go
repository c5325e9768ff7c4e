// Ordering keys: the seq an ordered message takes on its enqueuing transaction, and the held
// keys that Stats reports. Broken keys and their repair are in broken.go.

package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// nextSeq takes key's next seq on tx and leaves the key's counter row locked until tx ends: a
// second transaction enqueueing for the key waits there, and takes the following seq once the
// first commits (or the same one if it rolls back).
//
// The counter statement runs under the key's named lock (OrderingKeyLock), so that one session
// at a time waits in it. Two waiting there could deadlock each other with no other lock
// involved: when the key is new and the transaction that inserted its row rolls back, MariaDB
// turns every waiter's lock into a lock on the gap the row leaves, and each waiter's insert
// then waits for the other's gap lock. The victim would be a business transaction.
//
// The named lock waits at most a second; then the statement runs without it and waits for the
// row like any row lock. That bounds the delay when this transaction itself holds the row (a
// second event of a key in one transaction) while another session waits for it under the named
// lock, and it leaves a real cycle with the application's own locks to InnoDB's deadlock
// detector, which cannot see named locks. A key's first transaction would have to stay open
// that long, with two others waiting for it, and roll back, for the deadlock above to recur.
func nextSeq(ctx context.Context, tx DBTX, key string) (seq int64, err error) {
	// A named lock belongs to a session: on a pool, one pinned connection takes and releases it.
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
	return q.OrderingNext(ctx, sendDB(tx), key)
}

// HeldKey is one held ordering key (Snapshot.Held).
type HeldKey struct {
	// OrderingKey is the key (group-prefixed, as generated code builds it).
	OrderingKey string
	// Head is the message holding the key, HeadStatus its status (FAILED or PENDING) and
	// HeadEventType its event type (the key's group can span several types).
	Head          MessageID
	HeadStatus    Status
	HeadEventType string
	// Waiting is how many messages of the key wait behind the head.
	Waiting int64
	// For is how long the first of them has waited since it was enqueued.
	For time.Duration
}
