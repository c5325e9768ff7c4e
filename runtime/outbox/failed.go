package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/outboxgen/outboxgen/runtime/internal/store"
)

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
	// before now on the database clock. That is the clock failed_at was written with, so "the
	// last hour" means the same whatever this machine's clock says. Negative is an error. With
	// FailedSince, both apply.
	FailedWithin time.Duration
	// DryRun makes Retry count the rows it would change, and change nothing.
	DryRun bool
	// Newest makes ListFailed return the most recently failed rows first, by failed_at and
	// then id. Otherwise the oldest come first.
	Newest bool
}

// FailedMessage is one FAILED row, as ListFailed returns it.
type FailedMessage struct {
	ID             MessageID
	EventType      string
	Payload        json.RawMessage
	IdempotencyKey string
	// Attempts is the number of claims made. MaxAttempts is the budget it had.
	Attempts, MaxAttempts int
	// LastError is the last handler error, or the reclaim's reason. For a panic it includes the
	// stack.
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
		// A Duration reaches back at most 292 years, so the cutoff stays within DATETIME's range.
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

// Retry returns the FAILED messages matching f to PENDING, due now. Their attempts reset to 0,
// a fresh budget of MaxAttempts. Their last_error stays. Retry returns the number of rows
// changed. With f.DryRun it returns the number it would change, and changes nothing. Workers
// pick the rows up at their next poll.
//
// Retry moves retryBatch rows per statement until none is left or ctx is done. On a *sql.DB
// each batch is its own READ COMMITTED transaction. A large retry thus never holds many locks
// for long, and a cancelled one rolls back only its current batch. On a *sql.Tx or *sql.Conn
// the batches run there, as they are. After an error, the count is what earlier batches moved.
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
	// One batch takes the next retryBatch matching rows, or the next retryBatch of the given ids.
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
