package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"time"
)

// DBTX is what Enqueue, Stats and the operator calls run on, a *sql.DB, *sql.Tx or *sql.Conn.
// Enqueue is meant for a *sql.Tx, the caller's own transaction.
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
	// Payload is the JSON body. Required. It must be valid JSON.
	Payload json.RawMessage
	// IdempotencyKey is stored and delivered with the message. Empty means the worker delivers
	// "msg:<id>" instead, which is unique per row.
	IdempotencyKey string
	// MaxAttempts is resolved at enqueue and stored on the row. Zero takes the default, 10.
	MaxAttempts int
	// OrderingKey, when set, puts the message in its key's order. Messages with the same
	// OrderingKey are handled one at a time, in the order their enqueuing transactions
	// committed, which need not be id order. Generated code sets it from the catalog's
	// ordering_key, prefixed by the ordering group. Keys are compared byte for byte. A key is
	// valid UTF-8 of at most 191 bytes. Enqueuing an ordered message locks its key's counter
	// row until the transaction ends. Concurrent transactions enqueueing for one key therefore
	// wait for each other, as docs/ordering.md explains.
	OrderingKey string
}

// Delivery describes one handler call.
type Delivery struct {
	MessageID MessageID
	EventType string
	// IdempotencyKey is the message's key, or "msg:<id>" when it was enqueued without one.
	IdempotencyKey string
	// Attempt is 1 on the first delivery and counts claims. A claim whose worker died counts.
	Attempt int
	// EnqueuedAt is the row's created_at, from the database clock, in UTC. For a message InTx
	// handed off to a worker of the enqueuing process, it is that process's clock at the
	// enqueue. The hand-off does not read created_at back from the database.
	EnqueuedAt time.Time
	// ClaimToken identifies the claim that produced this delivery. It is stored in claim_token.
	// Every result write is fenced on it, so a duplicate delivery can be traced to an earlier
	// claim whose write never landed. It serves logs and audits, and handlers need not use it.
	ClaimToken string
	// MaxAttempts is the message's attempt budget. Attempt == MaxAttempts is the last try.
	MaxAttempts int
	// Headers are the message's headers, from Header options and enqueue hooks such as the
	// trace context. It is nil when the message has none. The map is the handler's own.
	Headers map[string]string
	// OrderingKey is the message's ordering key, or "" for an unordered message.
	OrderingKey string
}

// Backoff bounds the exponential retry delay. The n-th retry waits a random duration between b
// and 1.5 x b, where b = min(Max, Initial x 2^(n-1)), and never longer than Max. No retry thus
// comes sooner than Initial, waits grow, and instances that failed together spread out. Zero
// fields take the defaults, 1s and 1h. Max may be at most 100 years.
type Backoff struct {
	Initial, Max time.Duration
}

// Policy is an event type's retry policy. Zero fields take the defaults, which are
// MaxAttempts 10, Backoff 1s..1h and Timeout 1m.
type Policy struct {
	// MaxAttempts is the number of claims after which a failing message is FAILED. The budget
	// is resolved at enqueue and stored on the row as Message.MaxAttempts. The worker goes by
	// the row, so a message keeps the budget it was enqueued with across deploys. Generated
	// code passes the catalog's value to both Enqueue and Router.Handle. Defaults to 10.
	MaxAttempts int
	// Backoff is the delay between attempts. Defaults to 1s..1h.
	Backoff Backoff
	// Timeout is the handler's deadline. It must be shorter than the worker's StaleAfter, or a
	// slow handler would be reclaimed and run twice. Defaults to 1m.
	Timeout time.Duration
	// DeleteWhenSent deletes a message's row when its handler succeeds, in the fenced write
	// that would mark it SENT, instead of keeping it until Retention.Sent. For high-volume
	// types whose delivered rows nobody inspects: Inspect and `outboxgen show` then find
	// nothing once a message is delivered. Observers and Drain count it as sent. events.yaml
	// sets it with delete_when_sent: true. Defaults to false.
	DeleteWhenSent bool
	// Concurrency, when positive, is the most handlers of this event type that one worker runs
	// at once. A claim takes no more rows of the type than it has slots free, and other types
	// keep flowing while the type is at its limit. Zero means no limit of its own.
	Concurrency int
	// RateLimit, when set, bounds how often the type's messages are claimed across every
	// worker on the table, through a token bucket in the database. The zero Rate means no
	// limit.
	RateLimit Rate
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

// HandlerFunc handles one delivery of a message. Returning nil marks it SENT. An error
// schedules a retry, unless Permanent or RetryAfter says otherwise. Delivery is at-least-once.
// A handler may see the same message again, so effects that must not repeat check
// d.IdempotencyKey, with Once for database effects.
type HandlerFunc func(ctx context.Context, payload json.RawMessage, d Delivery) error
