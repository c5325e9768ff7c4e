// Enqueue and its guards: the checks on a message and its handle, and the INSERTs that write it.

package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/outboxgen/outboxgen/runtime/internal/store"
)

// q is the sqlc-generated statement set (queries/*.sql); it holds no state and runs on any
// DBTX. All SQL of this package goes through it.
var q = store.New()

// sdb adapts a DBTX to sqlc's interface, which also lists PrepareContext (never called: the
// package is generated without prepared statements). *sql.DB, *sql.Tx and *sql.Conn have it.
func sdb(db DBTX) store.DBTX {
	if s, ok := db.(store.DBTX); ok {
		return s
	}
	return noPrepare{db}
}

type noPrepare struct{ DBTX }

func (noPrepare) PrepareContext(context.Context, string) (*sql.Stmt, error) {
	return nil, errors.New("outbox: PrepareContext is not supported on this DBTX")
}

// EnqueueOption changes one Enqueue call.
type EnqueueOption func(*enqueueOptions)

type enqueueOptions struct {
	delay      time.Duration
	standalone bool
	headers    map[string]string
}

// Standalone allows Enqueue on a pool (*sql.DB, or an ORM's handle outside a transaction) or
// a *sql.Conn outside a transaction, where the message commits on its own at once. That is
// right only when the message is the only write it belongs with: a scheduled reminder, a
// message about data in another system, a backfill. Beside a business change in this database,
// enqueue on that change's *sql.Tx instead: with a pool, the message is committed whether or
// not the change is (the dual write outboxgen exists to prevent), so Enqueue refuses it unless
// this option says it is meant.
//
// The message still commits whole or not at all: an ordered message, which takes several
// statements, is written in a transaction of its own, begun with the handle's BeginTx and
// committed before Enqueue returns. An error from that commit leaves it unknown whether the
// message was committed (whole, if it was).
func Standalone() EnqueueOption {
	return func(o *enqueueOptions) { o.standalone = true }
}

// Delay makes the message due d after the enqueue (by the database clock) instead of at once.
// A negative d counts as zero.
func Delay(d time.Duration) EnqueueOption {
	return func(o *enqueueOptions) {
		if d > 0 {
			o.delay = d
		}
	}
}

// isNil catches the nil interface and the typed nils of database/sql, which would panic inside
// the driver call rather than say what is wrong.
func isNil(tx DBTX) bool {
	switch v := tx.(type) {
	case nil:
		return true
	case *sql.Tx:
		return v == nil
	case *sql.DB:
		return v == nil
	case *sql.Conn:
		return v == nil
	}
	return false
}

// maxDelay keeps a delay in microseconds well inside MariaDB's DATETIME range arithmetic.
const maxDelay = 100 * 365 * 24 * time.Hour

// Enqueue inserts m into outbox_messages on tx, which should be the caller's own transaction:
// the message becomes visible to workers only when the caller commits, and disappears if the
// caller rolls back, together with the business change it belongs to. On a transaction
// Enqueue never begins, commits or rolls back anything; an unordered message is one INSERT,
// sent on a *sql.Tx as one round trip whatever the DSN (see inlineExec). Through any other
// handle (an ORM's transaction) its SQL text is the same for every message, so a handle that
// caches prepared statements holds a few of them, not one per message (see sendDB). Because
// it cannot know when the caller commits, it cannot wake the worker: use InTx, or call
// Wake(db) after Commit, to cut the latency below the worker's PollInterval.
//
// tx may be a *sql.Tx (or a type wrapping one, an ORM's transaction), or a *sql.Conn inside a
// transaction (BEGIN on it; two round trips more, to ask the session). A handle on which the
// message would commit on its own is refused unless Standalone is given: a *sql.DB, any other
// handle that can begin transactions and has no Commit (an ORM's pool), a *sql.Conn outside
// a transaction. Whatever the handle, the message and its ordering entries commit together or
// not at all.
//
// m.EventType must be non-empty and m.Payload valid JSON of at most MaxPayloadBytes; the
// payload is stored and delivered byte for byte (key order, spacing and number spelling are
// kept on every server). m.MaxAttempts 0 takes the default (10). created_at and next_attempt_at come from the database clock (plus Delay, if given).
func Enqueue(ctx context.Context, tx DBTX, m Message, opts ...EnqueueOption) (MessageID, error) {
	if isNil(tx) {
		return 0, errors.New("outbox: Enqueue: nil tx (a nil *sql.Tx: did BeginTx fail?)")
	}
	if m.EventType == "" {
		return 0, errors.New("outbox: Enqueue: empty EventType")
	}
	if err := checkMessage(m); err != nil {
		return 0, fmt.Errorf("outbox: Enqueue %w", err)
	}
	if m.MaxAttempts == 0 {
		m.MaxAttempts = DefaultMaxAttempts
	}
	var o enqueueOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.delay > maxDelay {
		return 0, fmt.Errorf("outbox: Enqueue %q: Delay %s longer than %s", m.EventType, o.delay, maxDelay)
	}
	// Only an ordered message takes more than one statement (its key's counter, the message,
	// its queue entry); on a handle that autocommits, they get a transaction of their own.
	var own bool
	switch kindOf(tx) {
	case handlePool:
		if !o.standalone {
			return 0, refuseAutocommit(m.EventType, tx)
		}
		own = m.OrderingKey != ""
	case handleConn:
		if o.standalone && m.OrderingKey == "" {
			break // one statement: atomic whether the session is in a transaction or not
		}
		in, err := inTransaction(ctx, tx)
		if err != nil {
			return 0, fmt.Errorf("outbox: Enqueue %q: %w", m.EventType, err)
		}
		if !in && !o.standalone {
			return 0, refuseAutocommit(m.EventType, tx)
		}
		own = !in
	}
	headers, err := headersOf(ctx, m.EventType, o.headers)
	if err != nil {
		return 0, fmt.Errorf("outbox: Enqueue %q: %w", m.EventType, err)
	}
	hdr, err := encodeHeaders(headers)
	if err != nil {
		return 0, fmt.Errorf("outbox: Enqueue %q: headers: %w", m.EventType, err)
	}
	if own {
		return enqueueOwnTx(ctx, tx, m, o, hdr)
	}
	return enqueueOn(ctx, tx, m, o, hdr)
}

// refuseAutocommit is Enqueue's error for a handle on which the message would commit on its
// own without Standalone.
func refuseAutocommit(eventType string, tx DBTX) error {
	what := fmt.Sprintf("%T, a pool", tx)
	switch tx.(type) {
	case *sql.DB:
		what = "a *sql.DB"
	case *sql.Conn:
		what = "a *sql.Conn outside a transaction"
	default:
		if kindOf(tx) == handleConn {
			what = fmt.Sprintf("%T, a connection outside a transaction", tx)
		}
	}
	return fmt.Errorf("outbox: Enqueue %q: tx is %s, so the message would commit on its own, whether or not your business change does: pass the *sql.Tx of the transaction that makes the change, or outbox.Standalone() if the message is the only write", eventType, what)
}

// enqueueOwnTx writes m in a transaction it begins on h, which autocommits, and commits it: the
// message and its ordering entries commit together or not at all. A deadline at any point
// rolls the transaction back (database/sql does, and the server does for a session that goes
// away before COMMIT).
func enqueueOwnTx(ctx context.Context, h DBTX, m Message, o enqueueOptions, hdr string) (MessageID, error) {
	tx, err := beginOwn(ctx, h)
	if err != nil {
		return 0, fmt.Errorf("outbox: Enqueue %q: Standalone: begin a transaction: %w", m.EventType, explain(err))
	}
	id, err := enqueueOn(ctx, tx, m, o, hdr)
	if err != nil {
		if rbErr := tx.Rollback(); rbErr != nil && !errors.Is(rbErr, sql.ErrTxDone) {
			err = errors.Join(err, fmt.Errorf("outbox: Enqueue %q: Standalone: rollback: %w", m.EventType, rbErr))
		}
		return 0, err
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("outbox: Enqueue %q: Standalone: commit (the message may be committed, whole): %w", m.EventType, err)
	}
	return id, nil
}

// enqueueOn writes m on tx, a transaction or a handle on which m takes a single statement.
func enqueueOn(ctx context.Context, tx DBTX, m Message, o enqueueOptions, hdr string) (MessageID, error) {
	if h := running.handoffFor(tx); h != nil {
		if m.OrderingKey == "" && o.delay == 0 {
			id, handed, err := h.enqueue(ctx, tx.(*sql.Tx), m, hdr)
			if err != nil {
				return 0, fmt.Errorf("outbox: Enqueue %q: %w", m.EventType, explain(err))
			}
			if handed {
				return id, nil
			}
		} else {
			h.notHandedOff()
		}
	}
	db := insertDB(tx, m, hdr)
	seq, err := enqueueSeq(ctx, tx, m)
	if err != nil {
		return 0, err
	}
	var id int64
	_, inline := db.(inlineExec)
	if m.OrderingKey == "" && o.delay == 0 && inline {
		id, err = q.MessageInsertNowInline(ctx, db, store.MessageInsertNowInlineParams{
			EventType:      m.EventType,
			Payload:        m.Payload,
			IdempotencyKey: m.IdempotencyKey,
			Headers:        sql.NullString{String: hdr, Valid: hdr != ""},
			MaxAttempts:    int32(m.MaxAttempts),
		})
	} else if m.OrderingKey == "" && o.delay == 0 {
		id, err = q.MessageInsertNow(ctx, db, store.MessageInsertNowParams{
			EventType:      m.EventType,
			Payload:        m.Payload,
			IdempotencyKey: m.IdempotencyKey,
			Headers:        sql.NullString{String: hdr, Valid: hdr != ""},
			MaxAttempts:    int32(m.MaxAttempts),
		})
	} else {
		id, err = q.MessageInsert(ctx, db, store.MessageInsertParams{
			EventType:      m.EventType,
			Payload:        m.Payload,
			IdempotencyKey: m.IdempotencyKey,
			Headers:        sql.NullString{String: hdr, Valid: hdr != ""},
			OrderingKey:    sql.NullString{String: m.OrderingKey, Valid: m.OrderingKey != ""},
			OrderingSeq:    sql.NullInt64{Int64: seq, Valid: m.OrderingKey != ""},
			MaxAttempts:    int32(m.MaxAttempts),
			DelayUs:        o.delay.Microseconds(),
		})
	}
	if err != nil {
		return 0, fmt.Errorf("outbox: Enqueue %q: %w", m.EventType, explain(err))
	}
	if err := enqueueQueueEntry(ctx, tx, m, seq, id); err != nil {
		return 0, err
	}
	return MessageID(id), nil
}

// MaxPayloadBytes is the largest payload Enqueue accepts: 4 MiB. A larger one is refused before
// the INSERT, with the event type, its size and this limit in the error. The server's
// max_allowed_packet must exceed it (MariaDB's default is 16 MiB, MySQL's 64 MiB). An outbox row
// is a notification, not a blob store: put large content elsewhere and enqueue its reference.
const MaxPayloadBytes = 4 << 20

// checkPayload refuses what the payload column would not give back byte for byte, or what no
// handler could decode: stored verbatim (utf8mb4_bin text), it must be JSON (RFC 8259: UTF-8).
// encoding/json accepts invalid UTF-8 inside strings, so UTF-8 is checked on its own.
func checkPayload(p []byte) error {
	if len(p) > MaxPayloadBytes {
		return fmt.Errorf("payload is %d bytes, over the limit of %d (outbox.MaxPayloadBytes)", len(p), MaxPayloadBytes)
	}
	if !utf8.Valid(p) {
		return errors.New("payload is not valid UTF-8 (JSON text must be)")
	}
	if !json.Valid(p) {
		return errors.New("payload is not valid JSON")
	}
	return nil
}

// maxInlineBytes bounds the messages Enqueue sends as one statement with inline literals (hex
// doubles them; max_allowed_packet must hold the statement). Larger ones go as arguments.
const maxInlineBytes = 64 << 10

// insertDB is where a message's INSERT goes: as sendDB sends it, but with arguments if it is
// too large to inline.
func insertDB(tx DBTX, m Message, hdr string) store.DBTX {
	if len(m.Payload)+len(m.IdempotencyKey)+len(hdr) <= maxInlineBytes {
		return sendDB(tx)
	}
	return sdb(tx)
}
