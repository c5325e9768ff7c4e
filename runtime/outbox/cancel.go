// Cancel: an operator's decision that PENDING messages must never be delivered. They become
// CANCELLED, a terminal status no claim, reclaim or retry reads. A message that is running
// finishes its attempt. Its result write then makes it CANCELLED instead of retrying it, and
// a success stays SENT, since the handler's effects happened.

package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/outboxgen/outboxgen/runtime/internal/store"
)

// StatusCancelled is the state of a message an operator cancelled with Cancel. It is never
// delivered nor retried, and is kept until Purge, as FAILED is.
const StatusCancelled Status = "CANCELLED"

// cancelBatch is how many messages one Cancel transaction takes.
const cancelBatch = 1000

// Cancel makes the PENDING messages that f selects CANCELLED, and marks the PROCESSING ones to
// become CANCELLED when their attempt ends, unless it succeeds. f needs IDs or EventType, or
// both. FailedSince, FailedWithin and Newest do not apply and are an error. A cancelled
// ordered message leaves its key's queue, so the key's next message can become its head.
// Cancel returns the number of messages changed. With f.DryRun it returns the number it would
// change, and changes nothing. A message already CANCELLED, SENT or FAILED is left alone.
//
// On a *sql.DB each batch of cancelBatch messages is its own READ COMMITTED transaction, which
// locks its rows by primary key. On a *sql.Tx or *sql.Conn the batches run there, as they are.
// After an error, the count is what earlier batches changed.
func Cancel(ctx context.Context, db DBTX, f Filter) (int64, error) {
	if len(f.IDs) == 0 && f.EventType == "" {
		return 0, errors.New("outbox: Cancel: the Filter needs IDs or an EventType: cancelling every message is not an operator's tool")
	}
	if !f.FailedSince.IsZero() || f.FailedWithin != 0 || f.Newest {
		return 0, errors.New("outbox: Cancel: FailedSince, FailedWithin and Newest select FAILED rows and do not apply")
	}
	a, err := f.args(ctx, db)
	if err != nil {
		return 0, fmt.Errorf("outbox: Cancel: %w", err)
	}
	if f.DryRun {
		n, err := q.MessageCountCancel(ctx, sdb(db), store.MessageCountCancelParams{
			AllIds: a.allIDs, Ids: a.ids, AnyType: a.anyType, EventType: a.eventType,
		})
		if err != nil {
			return 0, fmt.Errorf("outbox: Cancel (dry run): %w", explain(err))
		}
		return n, nil
	}
	run := func(ids []int64) (int64, error) {
		if pool, ok := db.(*sql.DB); ok {
			return execReadCommitted(ctx, pool, func(tx *sql.Tx) (int64, error) { return cancelIDs(ctx, tx, ids, a) })
		}
		return cancelIDs(ctx, sdb(db), ids, a)
	}
	var total int64
	if len(a.ids) > 0 {
		for start := 0; start < len(a.ids); start += cancelBatch {
			if err := ctx.Err(); err != nil {
				return total, fmt.Errorf("outbox: Cancel: %w", explain(err))
			}
			n, err := run(a.ids[start:min(start+cancelBatch, len(a.ids))])
			total += n
			if err != nil {
				return total, fmt.Errorf("outbox: Cancel: %w", explain(err))
			}
		}
		return total, nil
	}
	// By type: the PENDING rows batch by batch, then the running ones, then PENDING again for
	// a running one whose retry was written before its flag.
	pending, running := store.OutboxMessagesStatusPENDING, store.OutboxMessagesStatusPROCESSING
	for _, st := range []store.OutboxMessagesStatus{pending, running, pending} {
		for {
			if err := ctx.Err(); err != nil {
				return total, fmt.Errorf("outbox: Cancel: %w", explain(err))
			}
			ids, err := q.MessageCancelCandidates(ctx, sdb(db), store.MessageCancelCandidatesParams{
				Status: st, EventType: a.eventType, Limit: cancelBatch,
			})
			if err != nil {
				return total, fmt.Errorf("outbox: Cancel: %w", explain(err))
			}
			if len(ids) == 0 {
				break
			}
			n, err := run(ids)
			total += n
			if err != nil {
				return total, fmt.Errorf("outbox: Cancel: %w", explain(err))
			}
			// A claim may take a candidate first. Then fewer change than were read, and a
			// full batch still means more may follow.
			if len(ids) < cancelBatch {
				break
			}
		}
	}
	return total, nil
}

// cancelIDs cancels the messages ids that are still PENDING or PROCESSING, and of a's type
// when it names one, in db's transaction. It locks them first, so a claim cannot take one
// between the read of its status and the write.
func cancelIDs(ctx context.Context, db store.DBTX, ids []int64, a filterArgs) (int64, error) {
	rows, err := q.MessageCancelLock(ctx, db, store.MessageCancelLockParams{Ids: ids, AnyType: a.anyType, EventType: a.eventType})
	if err != nil {
		return 0, fmt.Errorf("lock: %w", err)
	}
	var pending, running, ordered []int64
	for _, r := range rows {
		switch r.Status {
		case store.OutboxMessagesStatusPENDING:
			pending = append(pending, r.ID)
			if r.OrderingKey.Valid {
				ordered = append(ordered, r.ID)
			}
		case store.OutboxMessagesStatusPROCESSING:
			running = append(running, r.ID)
		}
	}
	var n int64
	if len(pending) > 0 {
		c, err := q.MessageCancelPending(ctx, db, pending)
		if err != nil {
			return 0, fmt.Errorf("cancel: %w", err)
		}
		n += c
	}
	if len(ordered) > 0 {
		if _, err := q.OrderingQueueDeleteCancelled(ctx, db, ordered); err != nil {
			return 0, fmt.Errorf("release ordering keys: %w", err)
		}
	}
	if len(running) > 0 {
		c, err := q.MessageCancelRunning(ctx, db, running)
		if err != nil {
			return 0, fmt.Errorf("cancel running: %w", err)
		}
		n += c
	}
	return n, nil
}

// cancelReleases lists the ordered messages of a result batch whose write may make them
// CANCELLED: those going back to PENDING, which the write turns into CANCELLED when an
// operator cancelled them while they ran. The batch then takes a transaction, so the status
// and the key's release commit together.
func cancelReleases(batch []result) []int64 {
	var ids []int64
	for _, r := range batch {
		if r.outcome == OutcomeRetried && r.orderingKey != "" {
			ids = append(ids, int64(r.id))
		}
	}
	return ids
}

// releaseCancelled deletes the queue entries of those of ids that the batch made CANCELLED, so
// their keys' next messages become heads.
func releaseCancelled(ctx context.Context, db store.DBTX, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	if _, err := q.OrderingQueueDeleteCancelled(ctx, db, ids); err != nil {
		return fmt.Errorf("release cancelled ordering keys: %w", err)
	}
	return nil
}
