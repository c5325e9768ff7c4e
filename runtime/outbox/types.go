package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"time"
)

// DBTX is what Enqueue, Stats and the operator calls run on: *sql.DB, *sql.Tx or *sql.Conn.
// Enqueue is meant for a *sql.Tx: the caller's own transaction.
type DBTX interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// MessageID is the id of a row in outbox_messages.
type MessageID int64

// Message is one event to enqueue. Generated EnqueueX functions build it from a typed payload.
type Message struct {
	// EventType is the wire name from events.yaml, stored in event_type. Required.
	EventType string
	// Payload is the JSON body. Required; must be valid JSON.
	Payload json.RawMessage
	// IdempotencyKey is stored and delivered with the message. Empty means the worker delivers
	// "msg:<id>" instead, which is unique per row.
	IdempotencyKey string
	// MaxAttempts is resolved at enqueue and stored on the row. Zero takes the default, 10.
	MaxAttempts int
	// OrderingKey, when set, puts the message in its key's order: messages with the same
	// OrderingKey are handled one at a time, in the order their enqueuing transactions committed
	// (not in id order). Generated code sets it from the catalog's ordering_key, prefixed by the
	// ordering group. Compared byte for byte; valid UTF-8 of at most 191 bytes. Enqueuing an
	// ordered message locks its key's counter row until the transaction ends: concurrent
	// transactions enqueueing for one key wait for each other (docs/ordering.md).
	OrderingKey string
}

// Delivery describes one handler call.
type Delivery struct {
	MessageID MessageID
	EventType string
	// IdempotencyKey is the message's key, or "msg:<id>" when it was enqueued without one.
	IdempotencyKey string
	// Attempt is 1 on the first delivery and counts claims: a claim whose worker died counts.
	Attempt int
	// EnqueuedAt is the row's created_at, from the database clock, in UTC. For a message InTx
	// handed off to a worker of the enqueuing process (see InTx), it is that process's clock at
	// the enqueue, which the handoff does not read back from the database.
	EnqueuedAt time.Time
	// ClaimToken identifies the claim that produced this delivery (stored in claim_token). Every
	// result write is fenced on it, so a duplicate delivery can be traced to an earlier claim
	// whose write never landed. For logs and audits; handlers need not use it.
	ClaimToken string
	// MaxAttempts is the message's attempt budget: Attempt == MaxAttempts is the last try.
	MaxAttempts int
	// Headers are the message's headers (outbox.Header, enqueue hooks such as the trace
	// context); nil when it has none. The map is the handler's own.
	Headers map[string]string
	// OrderingKey is the message's ordering key; "" for an unordered message.
	OrderingKey string
}

// Backoff bounds the exponential retry delay: the n-th retry waits a random duration between b
// and 1.5 x b, where b = min(Max, Initial x 2^(n-1)), and never longer than Max. So no retry
// comes sooner than Initial, waits grow, and instances that failed together spread out. Zero
// fields take the defaults, 1s and 1h; Max may be at most 100 years.
type Backoff struct {
	Initial, Max time.Duration
}

// Policy is an event type's retry policy. Zero fields take the defaults: MaxAttempts 10,
// Backoff 1s..1h, Timeout 1m.
type Policy struct {
	// MaxAttempts is the number of claims after which a failing message is FAILED. The budget
	// is resolved at enqueue and stored on the row (Message.MaxAttempts, max_attempts), and the
	// worker goes by the row, so a message keeps the budget it was enqueued with across deploys;
	// generated code passes the catalog's value to both Enqueue and Router.Handle. Defaults to 10.
	MaxAttempts int
	// Backoff is the delay between attempts. Defaults to 1s..1h.
	Backoff Backoff
	// Timeout is the handler's deadline. It must be shorter than the worker's StaleAfter, or a
	// slow handler would be reclaimed and run twice. Defaults to 1m.
	Timeout time.Duration
}

// Built-in policy defaults, used when neither the catalog nor the caller sets a value.
const (
	DefaultMaxAttempts    = 10
	DefaultBackoffInitial = time.Second
	DefaultBackoffMax     = time.Hour
	DefaultTimeout        = time.Minute
)

// WithDefaults returns p with every zero field replaced by the built-in default.
func (p Policy) WithDefaults() Policy {
	if p.MaxAttempts == 0 {
		p.MaxAttempts = DefaultMaxAttempts
	}
	if p.Backoff.Initial == 0 {
		p.Backoff.Initial = DefaultBackoffInitial
	}
	if p.Backoff.Max == 0 {
		p.Backoff.Max = DefaultBackoffMax
	}
	if p.Backoff.Max < p.Backoff.Initial {
		p.Backoff.Max = p.Backoff.Initial
	}
	if p.Timeout == 0 {
		p.Timeout = DefaultTimeout
	}
	return p
}

// HandlerFunc handles one delivery of a message. Returning nil marks it SENT; an error
// schedules a retry (see Permanent and RetryAfter). Delivery is at-least-once: a handler may
// see the same message again, so effects that must not repeat check d.IdempotencyKey (Once).
type HandlerFunc func(ctx context.Context, payload json.RawMessage, d Delivery) error
