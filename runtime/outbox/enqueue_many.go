// EnqueueMany: many messages in few multi-row INSERTs, atomically, with their ids in input order.

package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/outboxgen/outboxgen/runtime/internal/store"
)

// EnqueueMany inserts ms into outbox_messages on tx, as Enqueue does for one message, and
// returns their ids in the order of ms. It is meant for backfills and fan-outs: the messages
// go in a few multi-row INSERTs instead of one statement each.
//
// Every message is checked, as Enqueue checks one, before the first statement. An invalid
// one is an error that names it as ms[i] (0-based), and nothing is written. The handle rules
// are Enqueue's: on a transaction the messages commit or roll back with it. A pool, or a
// *sql.Conn outside a transaction, is refused unless Standalone is given. The messages then
// commit together, in a transaction of their own, or not at all.
//
// The messages are written in input order, in chunks of 1, 8, 64, 512 or 4096 rows, each
// chunk one statement under the server's max_allowed_packet and the 65,535 placeholders a
// statement may have. The set of SQL texts is therefore small, which keeps a statement cache
// (GORM's PrepareStmt) bounded. On database/sql's own handles the values go inline, as
// Enqueue's do; through any other handle they go as arguments.
//
// created_at comes from the database clock (UTC), as Enqueue's does, and next_attempt_at is
// that plus Delay. The clock is read once per call before the first INSERT (per statement
// through a handle that is not database/sql's own), so messages of one call share it.
//
// Ordered messages keep their input order within their key. Each key's seqs are taken once
// per call, keys in byte order, so that two calls sharing keys cannot deadlock on them. Delay
// and Header apply to every message. Under InTx, the leading messages that a running worker
// can take are handed off to it, as Enqueue's are; the rest are claimed after the commit.
func EnqueueMany(ctx context.Context, tx DBTX, ms []Message, opts ...EnqueueOption) ([]MessageID, error) {
	if isNil(tx) {
		return nil, errors.New("outbox: EnqueueMany: nil tx (a nil *sql.Tx: did BeginTx fail?)")
	}
	var o enqueueOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.delay > maxDelay {
		return nil, fmt.Errorf("outbox: EnqueueMany: Delay %s longer than %s", o.delay, maxDelay)
	}
	rows := make([]manyRow, len(ms))
	hdrs := map[string]string{}
	for i, m := range ms {
		if err := checkMessage(m); err != nil {
			return nil, fmt.Errorf("outbox: EnqueueMany: ms[%d]: %w", i, err)
		}
		if m.MaxAttempts == 0 {
			m.MaxAttempts = DefaultMaxAttempts
		}
		hdr, ok := hdrs[m.EventType]
		if !ok {
			headers, err := headersOf(ctx, m.EventType, o.headers)
			if err == nil {
				hdr, err = encodeHeaders(headers)
			}
			if err != nil {
				return nil, fmt.Errorf("outbox: EnqueueMany: ms[%d] (%q): headers: %w", i, m.EventType, err)
			}
			hdrs[m.EventType] = hdr
		}
		rows[i] = manyRow{m: m, hdr: hdr}
	}
	if len(ms) == 0 {
		return []MessageID{}, nil
	}
	var own bool
	switch kindOf(tx) {
	case handlePool:
		if !o.standalone {
			return nil, refuseAutocommitMany(tx)
		}
		own = true
	case handleConn:
		in, err := inTransaction(ctx, tx)
		if err != nil {
			return nil, fmt.Errorf("outbox: EnqueueMany: %w", err)
		}
		if !in && !o.standalone {
			return nil, refuseAutocommitMany(tx)
		}
		own = !in
	}
	if !own {
		return enqueueManyOn(ctx, tx, rows, o)
	}
	otx, err := beginOwn(ctx, tx)
	if err != nil {
		return nil, fmt.Errorf("outbox: EnqueueMany: Standalone: begin a transaction: %w", explain(err))
	}
	ids, err := enqueueManyOn(ctx, otx, rows, o)
	if err != nil {
		if rbErr := otx.Rollback(); rbErr != nil && !errors.Is(rbErr, sql.ErrTxDone) {
			err = errors.Join(err, fmt.Errorf("outbox: EnqueueMany: Standalone: rollback: %w", rbErr))
		}
		return nil, err
	}
	if err := otx.Commit(); err != nil {
		return nil, fmt.Errorf("outbox: EnqueueMany: Standalone: commit (the messages may be committed, all of them): %w", err)
	}
	return ids, nil
}

// checkMessage is Enqueue's check of one message, for EnqueueMany.
func checkMessage(m Message) error {
	switch {
	case m.EventType == "":
		return errors.New("empty EventType")
	case len(m.EventType) > 191 || !utf8.ValidString(m.EventType):
		return fmt.Errorf("%q: EventType must be valid UTF-8 of at most 191 bytes", m.EventType)
	case len(m.IdempotencyKey) > 191 || !utf8.ValidString(m.IdempotencyKey):
		return fmt.Errorf("%q: IdempotencyKey must be valid UTF-8 of at most 191 bytes (got %d bytes)", m.EventType, len(m.IdempotencyKey))
	case len(m.OrderingKey) > 191 || !utf8.ValidString(m.OrderingKey):
		return fmt.Errorf("%q: OrderingKey must be valid UTF-8 of at most 191 bytes (got %d bytes)", m.EventType, len(m.OrderingKey))
	case m.MaxAttempts < 0 || m.MaxAttempts > math.MaxInt32:
		return fmt.Errorf("%q: MaxAttempts %d out of range", m.EventType, m.MaxAttempts)
	}
	if err := checkPayload(m.Payload); err != nil {
		return fmt.Errorf("%q: %w", m.EventType, err)
	}
	return nil
}

func refuseAutocommitMany(tx DBTX) error {
	err := refuseAutocommit("", tx).Error()
	return errors.New(strings.Replace(err, `outbox: Enqueue "": `, "outbox: EnqueueMany: ", 1))
}

// manyRow is one checked message of an EnqueueMany call, with its encoded headers and, for an
// ordered message, its seq.
type manyRow struct {
	m   Message
	hdr string
	seq int64
}

// manyChunks are the row counts of EnqueueMany's statements, largest first. The largest times
// the parameters of a row (9) stays under the 65,535 placeholders of a prepared statement.
var manyChunks = [...]int{4096, 512, 64, 8, 1}

// manyMarkerPrefix starts the claim_token of rows whose ids are read back. It is 4 bytes of the
// column's 32, so that the marker is told apart from a claim's token.
const manyMarkerPrefix = "many"

// enqueueManyOn writes rows on tx, a transaction.
func enqueueManyOn(ctx context.Context, tx DBTX, rows []manyRow, o enqueueOptions) ([]MessageID, error) {
	ids := make([]MessageID, 0, len(rows))
	// Under InTx, messages are handed off one by one while a worker takes them. Only a leading
	// run is, so that ids still rise in input order.
	if h := running.handoffFor(tx); h != nil {
		for len(rows) > 0 && rows[0].m.OrderingKey == "" && o.delay == 0 {
			id, handed, err := h.enqueue(ctx, tx.(*sql.Tx), rows[0].m, rows[0].hdr)
			if err != nil {
				return nil, fmt.Errorf("outbox: EnqueueMany: ms[%d] (%q): %w", len(ids), rows[0].m.EventType, explain(err))
			}
			if !handed {
				break
			}
			ids = append(ids, id)
			rows = rows[1:]
		}
		if len(rows) > 0 {
			h.notHandedOff()
		}
	}
	if len(rows) == 0 {
		return ids, nil
	}
	set, err := q.ManySettings(ctx, sdb(tx))
	if err != nil {
		return nil, fmt.Errorf("outbox: EnqueueMany: read the server's settings: %w", explain(err))
	}
	if err := manySeqs(ctx, tx, rows); err != nil {
		return nil, err
	}
	ordered, plain := false, o.delay == 0
	for _, r := range rows {
		if r.m.OrderingKey != "" {
			ordered, plain = true, false
			break
		}
	}
	var marker sql.NullString
	if set.LockMode != 0 && set.LockMode != 1 {
		marker = sql.NullString{String: manyMarkerPrefix + newToken()[:32-len(manyMarkerPrefix)], Valid: true}
	}
	now, err := manyNow(set.Now)
	if err != nil {
		return nil, fmt.Errorf("outbox: EnqueueMany: read the server's clock: %w", err)
	}
	budget := manyBudget(set.MaxPacket)
	var queued []queueRow
	for len(rows) > 0 {
		n := chunkSize(rows, budget, func(r manyRow) int {
			return 2*(len(r.m.EventType)+len(r.m.Payload)+len(r.m.IdempotencyKey)+len(r.hdr)+len(r.m.OrderingKey)+len(marker.String)) + 300
		})
		chunk := rows[:n]
		rows = rows[n:]
		first, err := insertMessages(ctx, tx, chunk, o, plain, marker, now)
		if err != nil {
			return nil, fmt.Errorf("outbox: EnqueueMany: ms[%d:%d]: %w", len(ids), len(ids)+n, explain(err))
		}
		got, err := chunkIDs(ctx, tx, first, n, set.Increment, marker)
		if err != nil {
			return nil, fmt.Errorf("outbox: EnqueueMany: ms[%d:%d]: read the ids back: %w", len(ids), len(ids)+n, explain(err))
		}
		for i, r := range chunk {
			if r.m.OrderingKey != "" {
				queued = append(queued, queueRow{key: r.m.OrderingKey, seq: r.seq, id: int64(got[i])})
			}
		}
		ids = append(ids, got...)
	}
	if ordered {
		if err := insertQueue(ctx, tx, queued, budget); err != nil {
			return nil, err
		}
	}
	return ids, nil
}

// manyNow is ManySettings' clock, text in the server's DATETIME format, as a time in UTC.
func manyNow(v any) (time.Time, error) {
	var s string
	switch v := v.(type) {
	case []byte:
		s = string(v)
	case string:
		s = v
	case time.Time:
		return v.UTC(), nil
	default:
		return time.Time{}, fmt.Errorf("unexpected %T", v)
	}
	// Parsing accepts the fraction of a second though the layout has none.
	return time.ParseInLocation(time.DateTime, s, time.UTC)
}

// manyBudget is the largest statement EnqueueMany sends, in bytes: the packet limit less room
// for the protocol's framing.
func manyBudget(maxPacket int64) int {
	const room = 16 << 10
	if maxPacket < 2*room {
		return room
	}
	return int(min(maxPacket-room, math.MaxInt32))
}

// chunkSize is the number of leading rows of the next statement: the largest of manyChunks
// that there are rows for and whose estimated size fits budget. A single row always goes.
func chunkSize[T any](rows []T, budget int, size func(T) int) int {
	for _, n := range manyChunks {
		if n > len(rows) {
			continue
		}
		total := 0
		for _, r := range rows[:n] {
			if total += size(r); total > budget {
				break
			}
		}
		if total <= budget || n == 1 {
			return n
		}
	}
	return 1
}

// manySeqs takes the seqs of the ordered rows: for each key, in byte order, as many as the key
// has rows, in one statement under the key's named lock. The key's rows get them in input order.
func manySeqs(ctx context.Context, tx DBTX, rows []manyRow) error {
	count := map[string]int64{}
	for _, r := range rows {
		if r.m.OrderingKey != "" {
			count[r.m.OrderingKey]++
		}
	}
	if len(count) == 0 {
		return nil
	}
	keys := make([]string, 0, len(count))
	for k := range count {
		keys = append(keys, k)
	}
	slices.Sort(keys) // Go compares strings byte by byte, as the VARBINARY key column does
	next := make(map[string]int64, len(keys))
	for _, k := range keys {
		last, err := nextSeqs(ctx, tx, k, count[k])
		if err != nil {
			return fmt.Errorf("outbox: EnqueueMany: ordering key: %w", explain(err))
		}
		next[k] = last - count[k] + 1
	}
	for i := range rows {
		if k := rows[i].m.OrderingKey; k != "" {
			rows[i].seq = next[k]
			next[k]++
		}
	}
	return nil
}

// nextSeqs is nextSeq for n seqs of key at once, and returns the last of them. tx is a
// transaction, never a pool: EnqueueMany begins its own on a pool.
func nextSeqs(ctx context.Context, tx DBTX, key string, n int64) (last int64, err error) {
	return underKeyLock(ctx, tx, key, func() (int64, error) {
		return q.OrderingNextMany(ctx, sendDB(tx), store.OrderingNextManyParams{OrderingKey: key, N: n})
	})
}

// insertMessages writes chunk in one multi-row INSERT and returns the id of its first row. now
// is the call's clock, which the inline statement writes as a literal.
func insertMessages(ctx context.Context, tx DBTX, chunk []manyRow, o enqueueOptions, plain bool, marker sql.NullString, now time.Time) (int64, error) {
	db := sendDB(tx)
	if len(chunk) == 1 {
		db = insertDB(tx, chunk[0].m, chunk[0].hdr)
	}
	_, inline := db.(inlineExec)
	query, args := manyInsert(chunk, o, plain, inline, marker, now)
	res, err := db.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	if n, err := res.RowsAffected(); err != nil || n != int64(len(chunk)) {
		return 0, fmt.Errorf("the INSERT wrote %d rows of %d (%v)", n, len(chunk), err)
	}
	return res.LastInsertId()
}

// manyInsert is the multi-row INSERT of chunk and its arguments. With inline, the statement
// whose arguments go as literals: it has no expression for the server to evaluate per row.
func manyInsert(chunk []manyRow, o enqueueOptions, plain, inline bool, marker sql.NullString, now time.Time) (string, []any) {
	due := now.Add(time.Duration(o.delay.Microseconds()) * time.Microsecond)
	ctx := context.Background() // argRecorder does nothing with it
	rec := argRecorder{args: make([]any, 0, 10*len(chunk))}
	for _, r := range chunk {
		hdr := sql.NullString{String: r.hdr, Valid: r.hdr != ""}
		switch {
		case inline:
			_ = q.MessageInsertManyRowInline(ctx, &rec, store.MessageInsertManyRowInlineParams{
				EventType: r.m.EventType, Payload: r.m.Payload, IdempotencyKey: r.m.IdempotencyKey, Headers: hdr,
				OrderingKey: sql.NullString{String: r.m.OrderingKey, Valid: r.m.OrderingKey != ""},
				OrderingSeq: sql.NullInt64{Int64: r.seq, Valid: r.m.OrderingKey != ""},
				MaxAttempts: int32(r.m.MaxAttempts), NextAttemptAt: due, CreatedAt: now, ClaimToken: marker,
			})
		case plain:
			_ = q.MessageInsertManyRowNow(ctx, &rec, store.MessageInsertManyRowNowParams{
				EventType: r.m.EventType, Payload: r.m.Payload, IdempotencyKey: r.m.IdempotencyKey,
				Headers: hdr, MaxAttempts: int32(r.m.MaxAttempts), ClaimToken: marker,
			})
		default:
			_ = q.MessageInsertManyRow(ctx, &rec, store.MessageInsertManyRowParams{
				EventType: r.m.EventType, Payload: r.m.Payload, IdempotencyKey: r.m.IdempotencyKey, Headers: hdr,
				OrderingKey: sql.NullString{String: r.m.OrderingKey, Valid: r.m.OrderingKey != ""},
				OrderingSeq: sql.NullInt64{Int64: r.seq, Valid: r.m.OrderingKey != ""},
				MaxAttempts: int32(r.m.MaxAttempts), DelayUs: o.delay.Microseconds(), ClaimToken: marker,
			})
		}
	}
	return multiRow(rec.query, len(chunk)), rec.args
}

// chunkIDs are the ids of a chunk of n rows whose first id is first. With lock mode 0 or 1 they
// are consecutive, increment apart; otherwise they are read back by the call's marker.
func chunkIDs(ctx context.Context, tx DBTX, first int64, n int, increment int64, marker sql.NullString) ([]MessageID, error) {
	ids := make([]MessageID, 0, n)
	if !marker.Valid {
		if increment < 1 {
			increment = 1
		}
		for i := range int64(n) {
			ids = append(ids, MessageID(first+i*increment))
		}
		return ids, nil
	}
	got, err := q.MessageIDsByMarker(ctx, sendDB(tx), store.MessageIDsByMarkerParams{FirstID: first, ClaimToken: marker, Limit: int32(n)})
	if err != nil {
		return nil, err
	}
	if len(got) != n || got[0] != first {
		return nil, fmt.Errorf("found %d rows of %d from id %d", len(got), n, first)
	}
	for _, id := range got {
		ids = append(ids, MessageID(id))
	}
	return ids, nil
}

// queueRow is the queue entry of one ordered message.
type queueRow struct {
	key     string
	seq, id int64
}

// insertQueue writes the queue entries of the ordered messages, in chunks as the messages.
func insertQueue(ctx context.Context, tx DBTX, rows []queueRow, budget int) error {
	for len(rows) > 0 {
		n := chunkSize(rows, budget, func(r queueRow) int { return 2*len(r.key) + 100 })
		var rec argRecorder
		for _, r := range rows[:n] {
			_ = q.OrderingQueueInsertManyRow(ctx, &rec, store.OrderingQueueInsertManyRowParams{OrderingKey: r.key, Seq: r.seq, MessageID: r.id})
		}
		if _, err := sendDB(tx).ExecContext(ctx, multiRow(rec.query, n), rec.args...); err != nil {
			return fmt.Errorf("outbox: EnqueueMany: ordering queue: %w", explain(err))
		}
		rows = rows[n:]
	}
	return nil
}

// argRecorder collects what a sqlc-generated one-row INSERT would send: its text (the same for
// every row) and each row's arguments, in sqlc's order. sqlc cannot generate a multi-row VALUES
// list (its slices expand only inside IN), so multiRow repeats the row's tuple instead. The SQL
// stays in queries/many.sql and its arguments in sqlc's parameter structs.
type argRecorder struct {
	query string
	args  []any
}

func (r *argRecorder) ExecContext(_ context.Context, query string, args ...any) (sql.Result, error) {
	r.query = query
	r.args = append(r.args, args...)
	return nil, nil
}

func (r *argRecorder) QueryContext(context.Context, string, ...any) (*sql.Rows, error) {
	return nil, errors.New("outbox: argRecorder: no queries")
}

func (r *argRecorder) QueryRowContext(context.Context, string, ...any) *sql.Row { return nil }

func (r *argRecorder) PrepareContext(context.Context, string) (*sql.Stmt, error) {
	return nil, errors.New("outbox: argRecorder: no prepare")
}

// multiRows caches the multi-row texts: one per query and chunk size.
var multiRows sync.Map // multiRowKey -> string

type multiRowKey struct {
	query string
	n     int
}

// multiRow is query, a one-row INSERT ... VALUES (...), with its tuple repeated n times.
func multiRow(query string, n int) string {
	if n == 1 {
		return query
	}
	k := multiRowKey{query, n}
	if s, ok := multiRows.Load(k); ok {
		return s.(string)
	}
	i := strings.Index(query, "VALUES")
	head, tuple := query[:i+len("VALUES")], strings.TrimSpace(query[i+len("VALUES"):])
	var b strings.Builder
	b.Grow(len(head) + n*(len(tuple)+2))
	b.WriteString(head)
	b.WriteByte(' ')
	for j := range n {
		if j > 0 {
			b.WriteString(",\n")
		}
		b.WriteString(tuple)
	}
	s, _ := multiRows.LoadOrStore(k, b.String())
	return s.(string)
}
