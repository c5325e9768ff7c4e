package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/outboxgen/outboxgen/runtime/internal/store"
)

// Record is one message with every column, as Inspect returns it. Times come from the
// database clock, in UTC. A time that is not set is zero, such as ClaimedAt before the first
// claim or SentAt unless SENT.
type Record struct {
	ID             MessageID
	EventType      string
	Payload        json.RawMessage
	IdempotencyKey string
	Status         Status
	// Attempts is the number of claims made. MaxAttempts is the budget.
	Attempts, MaxAttempts int
	// NextAttemptAt is when a PENDING row becomes due. For other rows it is when the row was
	// last due.
	NextAttemptAt time.Time
	// ClaimedAt, ReclaimAfter and ClaimToken describe the last claim.
	ClaimedAt, ReclaimAfter time.Time
	ClaimToken              string
	// LastError is the whole last handler error, or the reclaim's reason. For a panic it
	// includes the stack.
	LastError                   string
	CreatedAt, SentAt, FailedAt time.Time
	// Headers are the message's headers, or nil when it has none.
	Headers map[string]string
	// OrderingKey is the message's ordering key, or "" for an unordered message.
	OrderingKey string
}

// ErrNotFound is returned by Inspect for an id that no row has.
var ErrNotFound = errors.New("outbox: no such message")

// Inspect returns one message, whatever its state. An operator reads it before retrying or
// discarding the message.
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
