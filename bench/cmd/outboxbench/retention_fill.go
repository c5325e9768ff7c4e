// Filling outbox_messages fast with finished or pending rows for the retention workloads, and
// the id queries they measure ranges of rows by.

package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// fillRows inserts n rows of ourType with 200-byte payloads, all with the given status and
// with created_at, next_attempt_at and (for SENT) sent_at set ago before now, and returns the
// first id. It writes a seed of multi-row INSERTs and then copies the rows it wrote with
// INSERT ... SELECT, doubling, in statements of at most fillChunk rows: far faster than the
// enqueue path, which a backlog of millions would make the run's longest part. Not timed.
func fillRows(ctx context.Context, db *sql.DB, n int, status string, ago time.Duration) (firstID int64, err error) {
	const seedRows, fillChunk = 1000, 100_000
	if n <= 0 {
		return 0, errors.New("fillRows: n must be > 0")
	}
	var before int64
	if err := db.QueryRowContext(ctx, "SELECT COALESCE(MAX(id), 0) FROM outbox_messages").Scan(&before); err != nil {
		return 0, err
	}
	sent := "NULL"
	if status == "SENT" {
		sent = "t"
	}
	at := fmt.Sprintf("TIMESTAMPADD(MICROSECOND, %d, UTC_TIMESTAMP(6))", -ago.Microseconds())
	seed := min(n, seedRows)
	var sb strings.Builder
	fmt.Fprintf(&sb, "INSERT INTO outbox_messages (event_type, payload, status, attempts, max_attempts, next_attempt_at, created_at, sent_at) SELECT e, p, '%s', %d, 10, t, t, %s FROM (", status, boolInt(status == "SENT"), sent)
	now := time.Now()
	for i := 0; i < seed; i++ {
		if i > 0 {
			sb.WriteString(" UNION ALL ")
		}
		// The payload is ASCII JSON with no single quote or backslash: safe between quotes.
		fmt.Fprintf(&sb, "SELECT '%s' AS e, '%s' AS p, %s AS t", ourType, makePayload(int64(i), now), at)
	}
	sb.WriteString(") s")
	if _, err := db.ExecContext(ctx, sb.String()); err != nil {
		return 0, fmt.Errorf("fill seed: %w", err)
	}
	if err := db.QueryRowContext(ctx, "SELECT MIN(id) FROM outbox_messages WHERE id > ?", before).Scan(&firstID); err != nil {
		return 0, err
	}
	for have := seed; have < n; {
		k := min(have, n-have, fillChunk)
		// Copies the first k rows of this fill; the derived table is materialised first, which
		// is what lets a statement read the table it inserts into.
		_, err := db.ExecContext(ctx, `INSERT INTO outbox_messages (event_type, payload, status, attempts, max_attempts, next_attempt_at, created_at, sent_at)
			SELECT event_type, payload, status, attempts, max_attempts, next_attempt_at, created_at, sent_at
			FROM (SELECT * FROM outbox_messages WHERE id >= ? ORDER BY id LIMIT ?) s`, firstID, k)
		if err != nil {
			return 0, fmt.Errorf("fill copy: %w", err)
		}
		have += k
	}
	return firstID, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// maxID is the highest id in outbox_messages (0 when empty).
func maxID(ctx context.Context, db *sql.DB) (int64, error) {
	var id int64
	err := db.QueryRowContext(ctx, "SELECT COALESCE(MAX(id), 0) FROM outbox_messages").Scan(&id)
	return id, err
}

// countRange counts the rows with from <= id <= to.
func countRange(ctx context.Context, db *sql.DB, from, to int64) (int64, error) {
	var n int64
	err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM outbox_messages WHERE id BETWEEN ? AND ?", from, to).Scan(&n)
	return n, err
}
