package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"
	"unicode/utf8"

	"github.com/go-sql-driver/mysql"

	"github.com/outboxgen/outboxgen/runtime/internal/store"
)

// Status is a row's state in outbox_messages.
type Status string

// The four states of a message.
const (
	StatusPending    Status = "PENDING"    // waiting for next_attempt_at, then claimable
	StatusProcessing Status = "PROCESSING" // claimed; its lease ends at reclaim_after
	StatusSent       Status = "SENT"       // a handler returned nil
	StatusFailed     Status = "FAILED"     // permanent error, attempts exhausted or undecodable
)

// TypeCounts are the numbers of one event type (or of the whole table, in Snapshot). SENT rows
// are never counted: that part of the table grows without bound.
type TypeCounts struct {
	// Pending rows, due or not.
	Pending int64
	// Due: pending rows whose next_attempt_at has passed and that can be claimed now (an ordered
	// message waiting behind its key's head is pending, not due).
	Due int64
	// Processing: claimed rows.
	Processing int64
	// Stale: processing rows whose lease (reclaim_after) has passed; the next reclaim takes them.
	Stale int64
	// Stuck: processing rows older than 3x their lease (now - claimed_at > 3 x (reclaim_after -
	// claimed_at)): nobody is reclaiming them. Anything above zero needs a person.
	Stuck int64
	// Failed rows, waiting for Retry or Purge.
	Failed int64
	// OldestPending is the age (database clock) of the oldest pending row, by created_at; 0 when
	// none is pending. It includes rows delayed or backed off into the future.
	OldestPending time.Duration
	// OldestDue is how long the longest-waiting due row has been claimable (now -
	// next_attempt_at); 0 when none is due. With a live worker it stays near PollInterval (more
	// under a backlog); when it grows, nobody is claiming.
	OldestDue time.Duration
	// Held is how many held ordering keys (Snapshot.HeldKeys) have a head message of this event
	// type. A key belongs to its ordering group, which can span several event types, so this
	// counts keys by the type of the message holding them, not of the messages waiting behind
	// it. Over all types these add up to Snapshot.HeldKeys.
	Held int64
}

// Snapshot is what Stats returns: the totals and the same counts per event type.
type Snapshot struct {
	Pending, Due, Processing, Stale, Stuck, Failed int64
	// OldestPending and OldestDue are the largest over all types.
	OldestPending, OldestDue time.Duration
	// ByType holds the counts of every event type that has a pending, processing or failed row
	// (a held key's head is one of them).
	ByType map[string]TypeCounts
	// HeldKeys is how many ordering keys are held: their head message cannot be claimed now
	// (FAILED, or PENDING until a later time: a retry's backoff, a Delay) while other messages
	// of the key wait behind it. A FAILED head holds its key until Retry or Purge.
	HeldKeys int64
	// OldestHeld is how long the longest-held key's first waiting message has waited since it
	// was enqueued; 0 when no key is held.
	OldestHeld time.Duration
	// Held lists up to MaxHeldListed held keys, the longest held first.
	Held []HeldKey
	// BrokenKeys is how many ordering keys are broken: stalled by a row the runtime never
	// leaves (a head entry whose message is missing, SENT or not the entry's, or an ordered
	// PENDING message without its entry), which no claim or retry would ever move. Workers'
	// maintenance repairs them; until then a person should know. Anything above zero is wrong.
	BrokenKeys int64
	// Broken lists up to MaxHeldListed of them (broken heads first, then unqueued messages).
	Broken []BrokenKey
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

// MaxHeldListed bounds Snapshot.Held (HeldKeys counts them all) and Snapshot.Broken.
const MaxHeldListed = 100

// Stats counts the table's PENDING, PROCESSING and FAILED rows by event type, with due-now,
// stale and stuck computed from each row's own lease, so it needs no worker configuration and
// any process (or `outboxgen status`) sees the same numbers. One query, on the database clock.
func Stats(ctx context.Context, db DBTX) (Snapshot, error) {
	rows, err := q.MessageStatsByType(ctx, sdb(db))
	if err != nil {
		return Snapshot{}, fmt.Errorf("outbox: Stats: %w", explain(err))
	}
	s := Snapshot{ByType: make(map[string]TypeCounts, len(rows))}
	for _, r := range rows {
		tc := TypeCounts{
			Pending: r.Pending, Due: r.Due, Processing: r.Processing, Stale: r.Stale,
			Stuck: r.Stuck, Failed: r.Failed, OldestPending: durationFromMicros(r.OldestPendingUs),
			OldestDue: durationFromMicros(r.OldestDueUs),
		}
		s.ByType[r.EventType] = tc
		s.Pending += tc.Pending
		s.Due += tc.Due
		s.Processing += tc.Processing
		s.Stale += tc.Stale
		s.Stuck += tc.Stuck
		s.Failed += tc.Failed
		s.OldestPending = max(s.OldestPending, tc.OldestPending)
		s.OldestDue = max(s.OldestDue, tc.OldestDue)
	}
	held, err := q.OrderingHeldKeys(ctx, sdb(db), math.MaxInt32)
	if err != nil {
		return Snapshot{}, fmt.Errorf("outbox: Stats: held keys: %w", explain(err))
	}
	s.HeldKeys = int64(len(held))
	for i, h := range held {
		d := durationFromMicros(h.HeldUs)
		s.OldestHeld = max(s.OldestHeld, d)
		// The head is PENDING or FAILED, so its type has a ByType entry, unless it was enqueued
		// between the two queries; then the entry holds this count alone.
		tc := s.ByType[h.HeadEventType]
		tc.Held++
		s.ByType[h.HeadEventType] = tc
		if i < MaxHeldListed {
			s.Held = append(s.Held, HeldKey{OrderingKey: h.OrderingKey, Head: MessageID(h.HeadID),
				HeadStatus: Status(h.HeadStatus), HeadEventType: h.HeadEventType, Waiting: h.Waiting, For: d})
		}
	}
	if s.BrokenKeys, s.Broken, err = brokenKeys(ctx, db); err != nil {
		return Snapshot{}, fmt.Errorf("outbox: Stats: broken keys: %w", explain(err))
	}
	return s, nil
}

// Filter selects FAILED messages for ListFailed and Retry. Zero fields match everything, so
// the zero Filter selects every FAILED row.
type Filter struct {
	// IDs, when non-empty, limits the selection to these messages.
	IDs []MessageID
	// EventType, when non-empty, limits the selection to one event type.
	EventType string
	// FailedSince, when non-zero, limits the selection to rows that failed at or after it.
	FailedSince time.Time
	// FailedWithin, when positive, limits the selection to rows that failed within this long
	// before now on the database clock, the clock failed_at was written with: "the last hour"
	// then means the same whatever this machine's clock says. Negative is an error. With
	// FailedSince, both apply.
	FailedWithin time.Duration
	// DryRun makes Retry count the rows it would change, and change nothing.
	DryRun bool
	// Newest makes ListFailed return the most recently failed rows first (by failed_at, then
	// id); otherwise the oldest come first.
	Newest bool
}

// FailedMessage is one FAILED row, as ListFailed returns it.
type FailedMessage struct {
	ID             MessageID
	EventType      string
	Payload        json.RawMessage
	IdempotencyKey string
	// Attempts is the number of claims made; MaxAttempts the budget it had.
	Attempts, MaxAttempts int
	// LastError is the last handler error (with the stack, for a panic), or the reclaim's reason.
	LastError string
	// CreatedAt and FailedAt come from the database clock, in UTC. FailedAt is zero for a row
	// made FAILED by hand without failed_at.
	CreatedAt, FailedAt time.Time
}

type filterArgs struct {
	allIDs, anyType, anyTime int64
	ids                      []int64
	eventType                string
	since                    sql.NullTime
}

// args resolves f into its statements' arguments. FailedWithin is turned into a time on the
// database clock, read once, so that every batch of a Retry and its dry run share one cutoff.
func (f Filter) args(ctx context.Context, db DBTX) (filterArgs, error) {
	a := filterArgs{allIDs: 1, anyType: 1, anyTime: 1, eventType: f.EventType}
	if len(f.IDs) > 0 {
		a.allIDs = 0
		a.ids = make([]int64, len(f.IDs))
		for i, id := range f.IDs {
			a.ids[i] = int64(id)
		}
	}
	if f.EventType != "" {
		a.anyType = 0
	}
	if !f.FailedSince.IsZero() {
		a.anyTime = 0
		a.since = sql.NullTime{Time: f.FailedSince.UTC(), Valid: true}
	}
	if f.FailedWithin < 0 {
		return filterArgs{}, fmt.Errorf("FailedWithin must not be negative, got %s", f.FailedWithin)
	}
	if f.FailedWithin > 0 {
		now, err := q.ClockNow(ctx, sdb(db))
		if err != nil {
			return filterArgs{}, fmt.Errorf("reading the database clock: %w", explain(err))
		}
		// A Duration reaches back at most 292 years: the cutoff stays within DATETIME's range.
		if cutoff := now.Add(-f.FailedWithin).UTC(); !a.since.Valid || cutoff.After(a.since.Time) {
			a.anyTime = 0
			a.since = sql.NullTime{Time: cutoff, Valid: true}
		}
	}
	return a, nil
}

// ListFailed returns up to limit FAILED messages matching f, oldest failure first. limit <= 0
// means 100.
func ListFailed(ctx context.Context, db DBTX, f Filter, limit int) ([]FailedMessage, error) {
	if limit <= 0 {
		limit = 100
	}
	limit = min(limit, math.MaxInt32)
	a, err := f.args(ctx, db)
	if err != nil {
		return nil, fmt.Errorf("outbox: ListFailed: %w", err)
	}
	p := store.MessageListFailedParams{
		AllIds: a.allIDs, Ids: a.ids, AnyType: a.anyType, EventType: a.eventType,
		AnyTime: a.anyTime, FailedSince: a.since, Limit: int32(limit),
	}
	var rows []store.MessageListFailedRow
	if f.Newest {
		var newest []store.MessageListFailedNewestRow
		newest, err = q.MessageListFailedNewest(ctx, sdb(db), store.MessageListFailedNewestParams(p))
		for _, r := range newest {
			rows = append(rows, store.MessageListFailedRow(r))
		}
	} else {
		rows, err = q.MessageListFailed(ctx, sdb(db), p)
	}
	if err != nil {
		return nil, fmt.Errorf("outbox: ListFailed: %w", explain(err))
	}
	out := make([]FailedMessage, len(rows))
	for i, r := range rows {
		out[i] = FailedMessage{
			ID: MessageID(r.ID), EventType: r.EventType, Payload: store.Bytes(r.Payload), IdempotencyKey: r.IdempotencyKey,
			Attempts: int(r.Attempts), MaxAttempts: int(r.MaxAttempts), LastError: store.Text(r.LastError),
			CreatedAt: r.CreatedAt, FailedAt: r.FailedAt.Time,
		}
	}
	return out, nil
}

// retryBatch is how many rows one Retry statement moves.
const retryBatch = 1000

// Retry returns the FAILED messages matching f to PENDING, due now, with attempts reset to 0
// (a fresh budget of MaxAttempts); last_error is kept as history. It returns the number of rows
// changed, or with f.DryRun the number it would change, changing nothing. Workers pick the
// rows up at their next poll.
//
// It moves retryBatch rows per statement until none is left or ctx is done; on a *sql.DB each
// batch is its own READ COMMITTED transaction, so a large retry never holds many locks for long
// and a cancelled one rolls back its current batch. On a *sql.Tx or *sql.Conn the batches run
// there, as they are. After an error, the count is what earlier batches moved.
func Retry(ctx context.Context, db DBTX, f Filter) (int64, error) {
	a, err := f.args(ctx, db)
	if err != nil {
		return 0, fmt.Errorf("outbox: Retry: %w", err)
	}
	if f.DryRun {
		n, err := q.MessageCountFailed(ctx, sdb(db), store.MessageCountFailedParams{
			AllIds: a.allIDs, Ids: a.ids, AnyType: a.anyType, EventType: a.eventType,
			AnyTime: a.anyTime, FailedSince: a.since,
		})
		if err != nil {
			return 0, fmt.Errorf("outbox: Retry (dry run): %w", explain(err))
		}
		return n, nil
	}
	// One batch: the next retryBatch matching rows, or the next retryBatch of the given ids.
	batch := func(ctx context.Context, db store.DBTX, ids []int64) (int64, error) {
		if len(a.ids) > 0 {
			return q.MessageRetryFailedIDs(ctx, db, store.MessageRetryFailedIDsParams{
				Ids: ids, AnyType: a.anyType, EventType: a.eventType, AnyTime: a.anyTime, FailedSince: a.since,
			})
		}
		return q.MessageRetryFailed(ctx, db, store.MessageRetryFailedParams{
			AllIds: 1, AnyType: a.anyType, EventType: a.eventType, AnyTime: a.anyTime, FailedSince: a.since, Limit: retryBatch,
		})
	}
	var total int64
	for start := 0; ; start += retryBatch {
		if err := ctx.Err(); err != nil {
			return total, fmt.Errorf("outbox: Retry: %w", explain(err))
		}
		var ids []int64
		if len(a.ids) > 0 {
			ids = a.ids[start:min(start+retryBatch, len(a.ids))]
		}
		var n int64
		var err error
		if pool, ok := db.(*sql.DB); ok {
			n, err = execReadCommitted(ctx, pool, func(tx *sql.Tx) (int64, error) { return batch(ctx, tx, ids) })
		} else {
			n, err = batch(ctx, sdb(db), ids)
		}
		total += n
		if err != nil {
			return total, fmt.Errorf("outbox: Retry: %w", explain(err))
		}
		if len(a.ids) > 0 && start+retryBatch >= len(a.ids) || len(a.ids) == 0 && n < retryBatch {
			return total, nil
		}
	}
}

// PurgeFilter selects what Purge deletes.
type PurgeFilter struct {
	// Status is StatusSent or StatusFailed; anything else is an error. Required.
	Status Status
	// OlderThan is the retention: rows sent (or failed) more than OlderThan ago, by the database
	// clock, are deleted. Must be >= 0. The purge scans by next_attempt_at, which the runtime
	// never sets after sent_at or failed_at; a row made FAILED by hand while due in the future
	// waits until that due time is also older than OlderThan (and one without failed_at counts
	// as failed at that due time). Must be 0 when IDs is set.
	OlderThan time.Duration
	// IDs, when non-empty, deletes exactly these messages, whatever their age, if they have
	// Status: an operator discarding messages that must never be delivered. At most 10,000.
	IDs []MessageID
	// BatchSize is the number of rows one DELETE removes (or ids one transaction takes), so
	// that no statement holds many row locks for long. Defaults to 1000.
	BatchSize int
	// DryRun makes Purge count the rows it would delete, and delete nothing.
	DryRun bool
}

// maxPurgeIDs bounds PurgeFilter.IDs: one DELETE takes them all.
const maxPurgeIDs = 10000

// Purge deletes SENT or FAILED rows older than f.OlderThan (or exactly f.IDs), in batches of
// f.BatchSize (each its own short statement), until none is left or ctx is done. It returns
// the number deleted, also when it stops early with an error; with f.DryRun, the number it
// would delete.
func Purge(ctx context.Context, db *sql.DB, f PurgeFilter) (int64, error) {
	if db == nil {
		return 0, errors.New("outbox: Purge: nil db")
	}
	if f.Status != StatusSent && f.Status != StatusFailed {
		return 0, fmt.Errorf("outbox: Purge: Status must be %s or %s, not %q", StatusSent, StatusFailed, f.Status)
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
		if f.Status == StatusSent {
			n, err = q.MessageCountPurgeSent(ctx, sdb(db), store.MessageCountPurgeSentParams{OlderThanUs: olderUs})
		} else {
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
			if f.Status == StatusSent {
				return q.MessagePurgeSent(ctx, tx, store.MessagePurgeSentParams{OlderThanUs: olderUs, Limit: int32(f.BatchSize)})
			}
			n, err := q.MessagePurgeFailed(ctx, tx, store.MessagePurgeFailedParams{OlderThanUs: olderUs, Limit: int32(f.BatchSize)})
			if err != nil || n == 0 {
				return n, err
			}
			// A purged FAILED head releases its ordering key (in the same transaction).
			_, err = q.OrderingQueueCleanup(ctx, tx)
			return n, err
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
// transaction: lock them by primary key, then delete what was locked. In a transaction, a
// Ctrl-C (ctx cancelled) before COMMIT rolls the batch back instead of letting the server
// finish a statement the client gave up on.
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
			// A purged FAILED ordered head releases its key (SENT ones left the queue already).
			if err := q.OrderingQueueDeleteMessages(ctx, tx, locked); err != nil {
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

// Record is one message with every column, as Inspect returns it. Times come from the
// database clock, in UTC; a time that is not set (ClaimedAt before the first claim, SentAt
// unless SENT, ...) is zero.
type Record struct {
	ID             MessageID
	EventType      string
	Payload        json.RawMessage
	IdempotencyKey string
	Status         Status
	// Attempts is the number of claims made; MaxAttempts the budget.
	Attempts, MaxAttempts int
	// NextAttemptAt is when a PENDING row becomes due (for others, when it last was).
	NextAttemptAt time.Time
	// ClaimedAt, ReclaimAfter and ClaimToken describe the last claim.
	ClaimedAt, ReclaimAfter time.Time
	ClaimToken              string
	// LastError is the whole last handler error (with the stack, for a panic), or the reclaim's
	// reason.
	LastError                   string
	CreatedAt, SentAt, FailedAt time.Time
	// Headers are the message's headers; nil when it has none.
	Headers map[string]string
	// OrderingKey is the message's ordering key; "" for an unordered message.
	OrderingKey string
}

// ErrNotFound is returned by Inspect for an id that no row has.
var ErrNotFound = errors.New("outbox: no such message")

// Inspect returns one message, whatever its state: what an operator reads before retrying or
// discarding it.
func Inspect(ctx context.Context, db DBTX, id MessageID) (Record, error) {
	r, err := q.MessageGet(ctx, sdb(db), int64(id))
	if errors.Is(err, sql.ErrNoRows) {
		return Record{}, fmt.Errorf("%w: id %d", ErrNotFound, id)
	}
	if err != nil {
		return Record{}, fmt.Errorf("outbox: Inspect(%d): %w", id, explain(err))
	}
	return Record{
		ID: MessageID(r.ID), EventType: r.EventType, Payload: store.Bytes(r.Payload), IdempotencyKey: r.IdempotencyKey,
		Status: Status(r.Status), Attempts: int(r.Attempts), MaxAttempts: int(r.MaxAttempts),
		NextAttemptAt: r.NextAttemptAt, ClaimedAt: r.ClaimedAt.Time, ReclaimAfter: r.ReclaimAfter.Time,
		ClaimToken: r.ClaimToken.String, LastError: store.Text(r.LastError),
		CreatedAt: r.CreatedAt, SentAt: r.SentAt.Time, FailedAt: r.FailedAt.Time,
		Headers: decodeHeaders(store.Text(r.Headers)), OrderingKey: r.OrderingKey.String,
	}, nil
}

// Once records (consumer, key) in outbox_inbox on tx and reports whether this is the first
// time. Call it inside the handler's own transaction, with d.IdempotencyKey, before the
// effects: if first is false, skip them and commit. Because the record commits or rolls back
// with the effects, the handler's database effects happen at most once even though delivery is
// at-least-once. A rolled-back transaction records nothing. consumer names the handler (so
// two handlers of one event deduplicate separately); both must be non-empty and at most 191
// characters. Keys compare byte for byte: "in_1Ab" and "in_1aB", "café" and "cafe", "a" and
// "a " are different keys on every server. The answer does not depend on the DSN's
// clientFoundRows.
//
// While another transaction holds the same (consumer, key) uncommitted, Once waits for it
// (innodb_lock_wait_timeout): then first is false if that transaction committed, true if it
// rolled back.
func Once(ctx context.Context, tx DBTX, consumer, key string) (first bool, err error) {
	if consumer == "" || key == "" {
		return false, fmt.Errorf("outbox: Once: consumer %q and key %q must be non-empty", consumer, key)
	}
	if utf8.RuneCountInString(consumer) > 191 || utf8.RuneCountInString(key) > 191 {
		return false, errors.New("outbox: Once: consumer and key must be at most 191 characters")
	}
	err = q.InboxInsert(ctx, sdb(tx), store.InboxInsertParams{Consumer: consumer, IdemKey: key})
	var me *mysql.MySQLError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &me) && me.Number == erDupEntry:
		return false, nil
	default:
		return false, fmt.Errorf("outbox: Once(%q, %q): %w", consumer, key, explain(err))
	}
}

// erDupEntry is ER_DUP_ENTRY, the same number on MySQL and MariaDB.
const erDupEntry = 1062

// execReadCommitted runs one range write (reclaim, purge) in its own READ COMMITTED
// transaction. In autocommit it would run at the session's REPEATABLE READ, whose next-key locks
// on the scanned index range also cover the gap where the application's new PENDING rows go, so
// every enqueue would wait for it (docs/design.md, "The claim": the same reason the claim runs
// READ COMMITTED).
//
// A transaction InnoDB chose as a deadlock victim (error 1213) was rolled back whole, and
// running it again is the documented response: it runs up to maxDeadlockTries times before the
// error is returned. A reclaim meets one now and then against claims and result writes that lock
// the same rows in the other order (seen in the bench's smoke run on MySQL 9.7); without the
// retry every one logged "outbox reclaim failed" at error level.
func execReadCommitted(ctx context.Context, db *sql.DB, fn func(tx *sql.Tx) (int64, error)) (n int64, err error) {
	for try := 1; ; try++ {
		n, err = execReadCommittedOnce(ctx, db, fn)
		if err == nil || try >= maxDeadlockTries || !isDeadlock(err) || ctx.Err() != nil {
			return n, err
		}
	}
}

// maxDeadlockTries is how often execReadCommitted runs a transaction that keeps being chosen as
// a deadlock victim.
const maxDeadlockTries = 3

// erLockDeadlock is ER_LOCK_DEADLOCK, the same number on MySQL and MariaDB.
const erLockDeadlock = 1213

// isDeadlock says err is MySQL error 1213: the transaction was rolled back as a deadlock victim.
func isDeadlock(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == erLockDeadlock
}

func execReadCommittedOnce(ctx context.Context, db *sql.DB, fn func(tx *sql.Tx) (int64, error)) (n int64, err error) {
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return 0, err
	}
	n, err = fn(tx)
	if err != nil {
		if rbErr := tx.Rollback(); rbErr != nil && !errors.Is(rbErr, sql.ErrTxDone) {
			err = errors.Join(err, fmt.Errorf("rollback: %w", rbErr))
		}
		return 0, err
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("commit: %w", err)
	}
	return n, nil
}
