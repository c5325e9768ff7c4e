// Broken ordering keys. Queue rows and ordered messages can stall a key for good, where no
// claim, result or retry would ever move them. The runtime never leaves them, since it writes
// and removes a message and its queue entry in one transaction. A hand-run DELETE or UPDATE
// can. Stats reports them, and the workers' maintenance repairs them.

package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/outboxgen/outboxgen/runtime/internal/store"
	"github.com/outboxgen/outboxgen/runtime/outboxlabel"
)

// BrokenReason says why an ordering key cannot move.
type BrokenReason string

// The ways a key breaks. A FAILED head is none of them. It holds its key by design until Retry
// or Purge, and Snapshot.Held lists it.
const (
	// BrokenHeadMissing says the key's head queue entry names a message that does not exist.
	BrokenHeadMissing BrokenReason = "head_missing"
	// BrokenHeadFinished says the key's head message is SENT, or in another status that never
	// runs again, but its queue entry was left behind.
	BrokenHeadFinished BrokenReason = "head_finished"
	// BrokenHeadMismatch says the key's head message exists but carries another key or seq than
	// its entry. The claim therefore never takes it as this key's head.
	BrokenHeadMismatch BrokenReason = "head_mismatch"
	// BrokenNotQueued says an ordered PENDING message has no queue entry at its own key and
	// seq. It is therefore never claimed. Its key moves on past it, or has no head at all.
	BrokenNotQueued BrokenReason = "not_queued"
)

// BrokenKey is one broken ordering key in Snapshot.Broken. It says what stalls the key and why.
type BrokenKey struct {
	// OrderingKey is the key, prefixed by its group as generated code builds it.
	OrderingKey string
	// Seq is the head entry's seq. For BrokenNotQueued it is the message's own seq, or 0 when
	// it has none.
	Seq int64
	// Message is the message the entry names, or the unqueued message.
	Message MessageID
	// Status and EventType are the message's. Both are empty when it is missing.
	Status    Status
	EventType string
	Reason    BrokenReason
}

// brokenKeys lists every broken key for Stats. It returns the number of distinct keys, and up
// to MaxHeldListed entries, broken heads first.
func brokenKeys(ctx context.Context, db DBTX) (int64, []BrokenKey, error) {
	heads, err := q.OrderingBrokenHeads(ctx, sdb(db), math.MaxInt32)
	if err != nil {
		return 0, nil, err
	}
	unqueued, err := q.OrderingUnqueued(ctx, sdb(db), store.OrderingUnqueuedParams{MinAgeUs: 0, Limit: math.MaxInt32})
	if err != nil {
		return 0, nil, err
	}
	keys := make(map[string]bool, len(heads)+len(unqueued))
	var list []BrokenKey
	add := func(b BrokenKey) {
		keys[b.OrderingKey] = true
		if len(list) < MaxHeldListed {
			list = append(list, b)
		}
	}
	for _, h := range heads {
		add(brokenHead(h))
	}
	for _, u := range unqueued {
		add(BrokenKey{OrderingKey: u.OrderingKey.String, Seq: u.OrderingSeq.Int64, Message: MessageID(u.ID),
			Status: StatusPending, EventType: u.EventType, Reason: BrokenNotQueued})
	}
	return int64(len(keys)), list, nil
}

// brokenHead describes a row of OrderingBrokenHeads.
func brokenHead(h store.OrderingBrokenHeadsRow) BrokenKey {
	b := BrokenKey{OrderingKey: h.OrderingKey, Seq: h.Seq, Message: MessageID(h.MessageID), EventType: h.EventType}
	switch {
	case h.Found == 0:
		b.Reason = BrokenHeadMissing
	case runnable(h.Status.OutboxMessagesStatus):
		b.Status, b.Reason = Status(h.Status.OutboxMessagesStatus), BrokenHeadMismatch
	default:
		b.Status, b.Reason = Status(h.Status.OutboxMessagesStatus), BrokenHeadFinished
	}
	return b
}

// runnable says a message in status s may still be claimed, again or for the first time. A
// queue entry naming it is live.
func runnable(s store.OutboxMessagesStatus) bool {
	return s == store.OutboxMessagesStatusPENDING || s == store.OutboxMessagesStatusPROCESSING || s == store.OutboxMessagesStatusFAILED
}

const (
	// brokenBatch bounds what one repair pass reads and fixes, one short transaction each.
	brokenBatch = 100
	// brokenPasses bounds the head passes of one run. Removing a broken head can uncover the
	// next entry of its key, broken too. The next run goes on.
	brokenPasses = 10
)

// brokenRepairs counts what one repair run did.
type brokenRepairs struct {
	removed  int64 // broken head entries deleted, whose keys move on
	requeued int64 // unqueued messages given an entry at the end of their key
}

// repairBrokenKeys repairs broken keys and logs each repair at warn level. Each repair is its
// own READ COMMITTED transaction that locks the message and the entry before it checks them.
// It thus acts only on committed rows that are still broken. It never acts on a concurrent
// enqueue, claim or result write.
//
//   - A broken head entry is deleted, and the key's next message becomes its head. The entry's
//     message is missing, finished or not the entry's. Whether it was delivered is not known
//     here, so the log line names it. The runtime writes and removes a message and its entries
//     in one transaction, so a committed entry in this state is never work in flight.
//   - An ordered PENDING message without its entry, enqueued at least minAge ago, takes a fresh
//     seq from its key's counter and an entry there. It runs after the key's queued messages,
//     and never beside a head being handled now. minAge keeps the repair off an enqueue that
//     writes its rows in separate statements.
//
// It goes on past a repair that fails and returns the first error.
func repairBrokenKeys(ctx context.Context, db *sql.DB, minAge time.Duration, log *slog.Logger) (brokenRepairs, error) {
	var done brokenRepairs
	var firstErr error
	keep := func(err error) {
		if firstErr == nil && err != nil {
			firstErr = err
		}
	}
	for pass := 0; pass < brokenPasses; pass++ {
		heads, err := q.OrderingBrokenHeads(ctx, db, brokenBatch)
		if err != nil {
			return done, errors.Join(firstErr, fmt.Errorf("list broken heads: %w", err))
		}
		var n int64
		for _, h := range heads {
			ok, err := removeBrokenHead(ctx, db, h)
			keep(err)
			if ok {
				n++
				b := brokenHead(h)
				log.LogAttrs(ctx, slog.LevelWarn, "outbox repaired broken ordering key",
					slog.String("ordering_key", outboxlabel.Escape(b.OrderingKey)), slog.Int64("seq", b.Seq),
					slog.Int64("message_id", int64(b.Message)), slog.String("reason", string(b.Reason)),
					slog.String("status", string(b.Status)), slog.String("repair", "head entry deleted"))
			}
		}
		done.removed += n
		if n == 0 {
			break
		}
	}
	unqueued, err := q.OrderingUnqueued(ctx, db, store.OrderingUnqueuedParams{MinAgeUs: minAge.Microseconds(), Limit: brokenBatch})
	if err != nil {
		return done, errors.Join(firstErr, fmt.Errorf("list unqueued messages: %w", err))
	}
	for _, u := range unqueued {
		seq, err := requeue(ctx, db, u.ID, minAge)
		keep(err)
		if seq > 0 {
			done.requeued++
			log.LogAttrs(ctx, slog.LevelWarn, "outbox repaired broken ordering key",
				slog.String("ordering_key", outboxlabel.Escape(u.OrderingKey.String)), slog.Int64("seq", u.OrderingSeq.Int64),
				slog.Int64("message_id", u.ID), slog.String("reason", string(BrokenNotQueued)),
				slog.Int64("new_seq", seq), slog.String("repair", "queued at the end of its key"))
		}
	}
	return done, firstErr
}

// removeBrokenHead deletes the entry h if, under lock, its message is still missing, finished
// or not the entry's. It says whether it deleted it.
func removeBrokenHead(ctx context.Context, db *sql.DB, h store.OrderingBrokenHeadsRow) (bool, error) {
	n, err := execReadCommitted(ctx, db, func(tx *sql.Tx) (int64, error) {
		// The message first, then the entry, in the order of every runtime write that takes both.
		msgs, err := q.BrokenMessageLock(ctx, tx, store.BrokenMessageLockParams{ID: h.MessageID})
		if err != nil {
			return 0, err
		}
		if len(msgs) == 1 {
			m := msgs[0]
			if runnable(m.Status) && m.OrderingKey.Valid && m.OrderingKey.String == h.OrderingKey &&
				m.OrderingSeq.Valid && m.OrderingSeq.Int64 == h.Seq {
				return 0, nil // the entry is its message's, so the key is not broken
			}
		}
		entry := store.BrokenEntryLockParams{OrderingKey: h.OrderingKey, Seq: h.Seq, MessageID: h.MessageID}
		if locked, err := q.BrokenEntryLock(ctx, tx, entry); err != nil || len(locked) == 0 {
			return 0, err
		}
		return q.BrokenEntryDelete(ctx, tx, store.BrokenEntryDeleteParams(entry))
	})
	if err != nil {
		return false, fmt.Errorf("delete broken head entry (message %d): %w", h.MessageID, err)
	}
	return n == 1, nil
}

// requeue gives message id, if under lock it is still an ordered PENDING message enqueued at
// least minAge ago without its entry, a fresh seq and an entry at the end of its key. It
// returns the new seq, or 0 when there was nothing to do.
func requeue(ctx context.Context, db *sql.DB, id int64, minAge time.Duration) (int64, error) {
	seq, err := execReadCommitted(ctx, db, func(tx *sql.Tx) (int64, error) {
		msgs, err := q.BrokenMessageLock(ctx, tx, store.BrokenMessageLockParams{ID: id, MinAgeUs: minAge.Microseconds()})
		if err != nil || len(msgs) == 0 {
			return 0, err
		}
		m := msgs[0]
		if m.Status != store.OutboxMessagesStatusPENDING || !m.OrderingKey.Valid || m.Old == 0 {
			return 0, nil
		}
		if m.OrderingSeq.Valid {
			entry, err := q.BrokenEntryLock(ctx, tx, store.BrokenEntryLockParams{OrderingKey: m.OrderingKey.String, Seq: m.OrderingSeq.Int64, MessageID: id})
			if err != nil || len(entry) > 0 {
				return 0, err
			}
		}
		// A fresh seq, not its old one. The counter hands out seqs above every queued one. The
		// entry thus cannot collide with a later enqueue's. The message cannot become the head
		// while the key's present head is being handled.
		seq, err := q.OrderingNext(ctx, tx, m.OrderingKey.String)
		if err != nil {
			return 0, err
		}
		// Retention drops the counter of a key with nothing queued, so the fresh seq can equal the
		// message's own. The UPDATE would then change no row, which is no sign of a change.
		if !m.OrderingSeq.Valid || m.OrderingSeq.Int64 != seq {
			if n, err := q.BrokenMessageReseq(ctx, tx, store.BrokenMessageReseqParams{Seq: sql.NullInt64{Int64: seq, Valid: true}, ID: id}); err != nil || n != 1 {
				if err == nil {
					err = fmt.Errorf("message %d changed under its lock", id)
				}
				return 0, err
			}
		}
		err = q.OrderingQueueInsert(ctx, tx, store.OrderingQueueInsertParams{OrderingKey: m.OrderingKey.String, Seq: seq, MessageID: id})
		return seq, err
	})
	if err != nil {
		return 0, fmt.Errorf("queue unqueued message %d: %w", id, err)
	}
	return seq, nil
}

// repairBroken is the maintenance loop's step. It makes one repair run and tracks its failures
// as an outage. Workers wake when a key moved.
func (w *Worker) repairBroken(ctx context.Context, down *outage) {
	done, err := repairBrokenKeys(ctx, w.db, w.cfg.StaleAfter, w.log)
	if err != nil && ctx.Err() == nil {
		down.fail(ctx, w.log, err)
	} else if err == nil {
		down.ok(ctx, w.log)
	}
	if done.removed+done.requeued > 0 {
		w.Wake()
	}
}
