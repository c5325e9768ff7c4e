// The SQL literal writer: statements sent with their arguments written in as literals, one round
// trip whatever the DSN.

package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/outboxgen/outboxgen/runtime/internal/store"
)

// inlineExec writes ExecContext's arguments into the statement as literals. The enqueue is then
// one round trip whatever the DSN says. With the driver's default (interpolateParams=false), a
// statement with arguments costs three: prepare, execute and close. Strings go as hex literals,
// which no sql_mode or connection charset changes, so nothing needs escaping. A hex literal
// is a binary string. Into a VARBINARY column it goes as is. Into a utf8mb4 text column its
// bytes are taken as utf8mb4, which they are: Enqueue validates them, and truncate makes
// last_error valid. No charset introducer is written, which spares the server a conversion.
type inlineExec struct{ store.DBTX }

func (e inlineExec) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	stmt, err := inlineArgs(query, args)
	if err != nil {
		return nil, err
	}
	return e.DBTX.ExecContext(ctx, stmt)
}

// QueryContext is ExecContext's counterpart for the claim's SELECT. (QueryRowContext is passed
// through with its arguments: a *sql.Row cannot carry an inlining error.)
func (e inlineExec) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	stmt, err := inlineArgs(query, args)
	if err != nil {
		return nil, err
	}
	return e.DBTX.QueryContext(ctx, stmt)
}

// sendDB is how an enqueue's statements go on tx. On database/sql's own handles they go with
// inline literals, one round trip each. Through any other handle (an ORM's or a wrapper's),
// they go with placeholders and the values as arguments. Such a handle may cache a prepared
// statement per SQL text, as GORM's PrepareStmt does. The text must then not vary with the
// values, or the cache grows with every message.
func sendDB(tx DBTX) store.DBTX {
	switch tx.(type) {
	case *sql.Tx, *sql.Conn, *sql.DB:
		return inlineExec{sdb(tx)}
	}
	return sdb(tx)
}

// inlineArgs replaces each ? of query, in order, with args' literal. The queries it gets
// (MessageInsert, the claim and the result writes) have no ? anywhere but their placeholders;
// a count mismatch is an error.
func inlineArgs(query string, args []any) (string, error) {
	if n := strings.Count(query, "?"); n != len(args) {
		return "", fmt.Errorf("inline: %d placeholders, %d arguments", n, len(args))
	}
	var b strings.Builder
	b.Grow(inlineSize(query, args)) // a multi-row INSERT is megabytes: growing by doubling would copy it over and over
	for _, a := range args {
		i := strings.IndexByte(query, '?')
		_, _ = leanClock.WriteString(&b, query[:i]) // strings.Builder's Write never fails
		query = query[i+1:]
		switch v := a.(type) {
		case string:
			writeHexString(&b, v)
		case []byte:
			writeHexString(&b, v)
		case json.RawMessage:
			writeHexString(&b, v)
		case sql.NullString:
			if !v.Valid {
				b.WriteString("NULL")
			} else {
				writeHexString(&b, v.String)
			}
		case sql.NullInt64:
			if !v.Valid {
				b.WriteString("NULL")
			} else {
				b.WriteString(strconv.FormatInt(v.Int64, 10))
			}
		case time.Time:
			// The worker requires a loc whose offset is zero, under which the driver sends times in UTC too.
			b.WriteString(v.UTC().Format("'2006-01-02 15:04:05.999999'"))
		case int32:
			b.WriteString(strconv.FormatInt(int64(v), 10))
		case int64:
			b.WriteString(strconv.FormatInt(v, 10))
		default:
			return "", fmt.Errorf("inline: argument of type %T", a)
		}
	}
	_, _ = leanClock.WriteString(&b, query)
	return b.String(), nil
}

// sqlcClock is how queries/*.sql spell the database clock in UTC to the microsecond, because
// sqlc's MySQL catalog has no UTC_TIMESTAMP(fsp). UTC_TIMESTAMP() and NOW(6) both read the
// statement's start time, so the sum is UTC_TIMESTAMP(6) exactly, on every server
// (TestClockSpellingsAgree). The server evaluates the three functions wherever the spelling
// appears, once per row, and an enqueue's INSERT pays for it. The statements inlineArgs writes
// get the one-function spelling; those sent with arguments keep sqlc's.
const sqlcClock = "TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP())"

var leanClock = strings.NewReplacer(sqlcClock, "UTC_TIMESTAMP(6)")

// inlineSize is the length of inlineArgs' statement, or a little more: a hex literal takes
// twice its bytes and three more, and every other literal at most 28.
func inlineSize(query string, args []any) int {
	n := len(query)
	for _, a := range args {
		switch v := a.(type) {
		case string:
			n += 2*len(v) + 3
		case []byte:
			n += 2*len(v) + 3
		case json.RawMessage:
			n += 2*len(v) + 3
		case sql.NullString:
			n += 2*len(v.String) + 4
		default:
			n += 28
		}
	}
	return n
}

// writeHexString writes v as a hex literal, through a buffer on the stack: no copy of v and no
// encoder to allocate, which a multi-row INSERT would pay for on every string of every row.
func writeHexString[T ~string | ~[]byte](b *strings.Builder, v T) {
	const digits = "0123456789abcdef"
	b.WriteString("X'")
	var buf [512]byte
	for len(v) > 0 {
		k := min(len(v), len(buf)/2)
		for i := range k {
			buf[2*i], buf[2*i+1] = digits[v[i]>>4], digits[v[i]&0x0f]
		}
		_, _ = b.Write(buf[:2*k]) // strings.Builder.Write always returns len(p), nil
		v = v[k:]
	}
	b.WriteByte('\'')
}
