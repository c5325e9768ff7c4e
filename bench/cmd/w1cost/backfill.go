// --backfill: the backfill's cost taken apart. Each variant writes the same messages in one
// transaction, commit included, on one connection; the variants run interleaved, one
// transaction each in turn, and the table is emptied between rounds so that every variant
// writes into a table of the same size. The report is the median per variant and its ratio to
// L0 (hand-written multi-row INSERTs of 4,096 rows).

package main

import (
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// backfill: --backfill, and its message count per transaction.
var (
	backfill  bool
	backfillN int
	// backfillSet picks the variants: "spell" takes EnqueueMany's statement apart, "lean" times
	// the lean statement's clock and chunk size, "many" is L0 and EnqueueMany alone.
	backfillSet string
)

type backfillVariant struct {
	name, what string
	run        func(ctx context.Context, tx *sql.Tx, ms []outbox.Message) error
}

// rowSpelling writes one message's tuple of a multi-row INSERT.
type rowSpelling func(b *strings.Builder, m outbox.Message)

func hexLit(b *strings.Builder, p []byte) {
	b.WriteString("X'")
	b.WriteString(hex.EncodeToString(p))
	b.WriteByte('\'')
}

// multiInsert sends ms as INSERTs of chunk rows each, head then one tuple per message.
func multiInsert(chunk int, head string, row rowSpelling) func(ctx context.Context, tx *sql.Tx, ms []outbox.Message) error {
	return func(ctx context.Context, tx *sql.Tx, ms []outbox.Message) error {
		for len(ms) > 0 {
			c := ms[:min(chunk, len(ms))]
			ms = ms[len(c):]
			var b strings.Builder
			b.WriteString(head)
			for i, m := range c {
				if i > 0 {
					b.WriteByte(',')
				}
				row(&b, m)
			}
			if _, err := tx.ExecContext(ctx, b.String()); err != nil {
				return err
			}
		}
		return nil
	}
}

// placeholders sends ms as prepared multi-row INSERTs of chunk rows with the values as
// arguments (binary protocol: no hex), the clock from the server.
func placeholders(chunk int) func(ctx context.Context, tx *sql.Tx, ms []outbox.Message) error {
	return func(ctx context.Context, tx *sql.Tx, ms []outbox.Message) error {
		for len(ms) > 0 {
			c := ms[:min(chunk, len(ms))]
			ms = ms[len(c):]
			q := "INSERT INTO outbox_messages (event_type, payload, max_attempts, next_attempt_at, created_at) VALUES " +
				strings.TrimSuffix(strings.Repeat("(?,?,10,UTC_TIMESTAMP(6),UTC_TIMESTAMP(6)),", len(c)), ",")
			args := make([]any, 0, 2*len(c))
			for _, m := range c {
				args = append(args, m.EventType, []byte(m.Payload))
			}
			if _, err := tx.ExecContext(ctx, q, args...); err != nil {
				return err
			}
		}
		return nil
	}
}

const nowExpr = "TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP())"

// tuple spells one row: each %s of f takes, in turn, the event type and the payload as hex
// literals, and $NOW the clock.
func tuple(f, clock string) rowSpelling {
	f = strings.ReplaceAll(f, "$NOW", clock)
	parts := strings.Split(f, "%s")
	return func(b *strings.Builder, m outbox.Message) {
		b.WriteString(parts[0])
		hexLit(b, []byte(m.EventType))
		b.WriteString(parts[1])
		hexLit(b, m.Payload)
		b.WriteString(parts[2])
	}
}

func backfillVariants() []backfillVariant {
	lean := "INSERT INTO outbox_messages (event_type, payload, max_attempts, next_attempt_at, created_at) VALUES "
	full := "INSERT INTO outbox_messages (event_type, payload, idempotency_key, headers, max_attempts, next_attempt_at, created_at, claim_token) VALUES "
	lit := "'" + time.Now().UTC().Format("2006-01-02 15:04:05.000000") + "'"
	const many = "(%s,CAST(%s AS BINARY),IFNULL(X'',x''),CAST(NULL AS BINARY),10,$NOW,$NOW,NULL)"
	vs := []backfillVariant{
		{"L0", "hand-written INSERTs of 4,096 rows, 5 columns, hex literals, UTC_TIMESTAMP(6)", multiInsert(4096, lean, tuple("(%s,%s,10,$NOW,$NOW)", "UTC_TIMESTAMP(6)"))},
		{"EnqueueMany", "outbox.EnqueueMany", func(ctx context.Context, tx *sql.Tx, ms []outbox.Message) error {
			_, err := outbox.EnqueueMany(ctx, tx, ms)
			return err
		}},
		{"spelled as EnqueueMany", "EnqueueMany's statement by hand: 8 columns, CAST, IFNULL, TIMESTAMPADD clock, NULLs", multiInsert(4096, full, tuple(many, nowExpr))},
		{"as EnqueueMany, literal clock", "the same with the clock as a '...' literal read once", multiInsert(4096, full, tuple(many, lit))},
		{"as EnqueueMany, UTC_TIMESTAMP(6)", "the same with UTC_TIMESTAMP(6)", multiInsert(4096, full, tuple(many, "UTC_TIMESTAMP(6)"))},
		{"literal clock, no IFNULL", "literal clock, X'' for the key", multiInsert(4096, full, tuple("(%s,CAST(%s AS BINARY),X'',CAST(NULL AS BINARY),10,$NOW,$NOW,NULL)", lit))},
		{"literal clock, no IFNULL, no CAST", "literal clock, plain literals and NULLs, 8 columns", multiInsert(4096, full, tuple("(%s,%s,X'',NULL,10,$NOW,$NOW,NULL)", lit))},
		{"L0, literal clock", "L0 with the literal clock", multiInsert(4096, lean, tuple("(%s,%s,10,$NOW,$NOW)", lit))},
		{"L0, 512 rows", "L0 in INSERTs of 512 rows", multiInsert(512, lean, tuple("(%s,%s,10,$NOW,$NOW)", "UTC_TIMESTAMP(6)"))},
		{"L0, placeholders", "L0 with ? for the strings (prepared unless --interpolate)", placeholders(4096)},
	}
	// L0 with what lock mode 2 adds: a marker in claim_token and the chunk's ids read back by it.
	marked := func(ctx context.Context, tx *sql.Tx, ms []outbox.Message) error {
		const marker = "many0123456789abcdef0123456789ab"
		for len(ms) > 0 {
			c := ms[:min(4096, len(ms))]
			ms = ms[len(c):]
			var b strings.Builder
			b.WriteString("INSERT INTO outbox_messages (event_type, payload, max_attempts, next_attempt_at, created_at, claim_token) VALUES ")
			for i, m := range c {
				if i > 0 {
					b.WriteByte(',')
				}
				tuple("(%s,%s,10,$NOW,$NOW,'"+marker+"')", lit)(&b, m)
			}
			res, err := tx.ExecContext(ctx, b.String())
			if err != nil {
				return err
			}
			first, err := res.LastInsertId()
			if err != nil {
				return err
			}
			rows, err := tx.QueryContext(ctx, "SELECT id FROM outbox_messages WHERE id >= ? AND claim_token = ? ORDER BY id LIMIT ?", first, marker, len(c))
			if err != nil {
				return err
			}
			n := 0
			for rows.Next() {
				n++
			}
			if err := errors.Join(rows.Err(), rows.Close()); err != nil || n != len(c) {
				return fmt.Errorf("read back %d ids of %d: %v", n, len(c), err)
			}
		}
		return nil
	}
	vs = append(vs, backfillVariant{"L0, literal clock, ids read back", "L0 with the literal clock, a marker in claim_token and each chunk's ids read back by it", marked})
	if backfillSet == "many" {
		vs = vs[:2]
	}
	if backfillSet == "lean" {
		const leanRow = "(%s,%s,X'',NULL,10,$NOW,$NOW,NULL)"
		vs = []backfillVariant{vs[0], vs[1],
			{"lean, TIMESTAMPADD clock, 4096", "8 columns, plain literals, the clock as sqlc spells it", multiInsert(4096, full, tuple(leanRow, nowExpr))},
			{"lean, literal clock, 4096", "8 columns, plain literals, the clock a literal read once", multiInsert(4096, full, tuple(leanRow, lit))},
			{"lean, TIMESTAMPADD clock, 512", "the same in INSERTs of 512 rows", multiInsert(512, full, tuple(leanRow, nowExpr))},
			{"lean, literal clock, 512", "the same in INSERTs of 512 rows", multiInsert(512, full, tuple(leanRow, lit))},
			{"lean, literal clock, 64", "the same in INSERTs of 64 rows", multiInsert(64, full, tuple(leanRow, lit))},
			{"L0, 512 rows", "L0 in INSERTs of 512 rows", multiInsert(512, lean, tuple("(%s,%s,10,$NOW,$NOW)", "UTC_TIMESTAMP(6)"))},
		}
	}
	return vs
}

func runBackfill(ctx context.Context, db *sql.DB, version string, rounds, n int) error {
	now := time.Now().UnixNano()
	ms := make([]outbox.Message, n)
	for i := range ms {
		head := fmt.Sprintf(`{"seq":%d,"ts":%d,"pad":"`, i, now)
		ms[i] = outbox.Message{EventType: "bench.event", Payload: []byte(head + strings.Repeat("x", max(0, 200-len(head)-2)) + `"}`)}
	}
	vs := backfillVariants()
	took := make([][]time.Duration, len(vs))
	for r := 0; r < rounds; r++ {
		for v, vr := range vs {
			if _, err := db.ExecContext(ctx, "TRUNCATE TABLE outbox_messages"); err != nil {
				return err
			}
			t0 := time.Now()
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			if err := vr.run(ctx, tx, ms); err != nil {
				_ = tx.Rollback()
				return fmt.Errorf("%s: %w", vr.name, err)
			}
			if err := tx.Commit(); err != nil {
				return err
			}
			took[v] = append(took[v], time.Since(t0))
			var c int
			if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM outbox_messages").Scan(&c); err != nil || c != n {
				return fmt.Errorf("%s: %d rows of %d (%v)", vr.name, c, n, err)
			}
		}
	}
	med := func(d []time.Duration) time.Duration {
		d = slices.Clone(d)
		slices.Sort(d)
		return d[len(d)/2]
	}
	fmt.Printf("w1cost --backfill on %s: %d messages per transaction, %d rounds, interleaved, one connection\n\n", version, n, rounds)
	fmt.Printf("| variant | median ms | msg/s | / L0 | / L0 per round: median (quartiles) | spread (min-max ms) | what |\n|---|---:|---:|---:|---|---|---|\n")
	l0 := med(took[0])
	for v, vr := range vs {
		m := med(took[v])
		ratios := make([]float64, rounds)
		for r := range ratios {
			ratios[r] = float64(took[0][r]) / float64(took[v][r])
		}
		slices.Sort(ratios)
		fmt.Printf("| %s | %.1f | %.0f | %.2fx | %.2fx (%.2f-%.2f) | %.1f-%.1f | %s |\n", vr.name, ms1(m), float64(n)/m.Seconds(), float64(l0)/float64(m),
			ratios[rounds/2], ratios[rounds/4], ratios[3*rounds/4], ms1(slices.Min(took[v])), ms1(slices.Max(took[v])), vr.what)
	}
	return nil
}

func ms1(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
