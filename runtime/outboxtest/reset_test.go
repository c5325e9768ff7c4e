package outboxtest

import (
	"context"
	"database/sql"
	"slices"
	"testing"

	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// TestResetKnowsEveryTable: Reset empties each table that Migrate creates, and a table added
// to the schema without a Reset statement fails here.
func TestResetKnowsEveryTable(t *testing.T) {
	t.Parallel()
	db := Open(t)
	ctx := context.Background()
	rows, err := db.QueryContext(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() ORDER BY table_name`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, n)
	}
	rows.Close()
	var known []string
	for _, rt := range resetTables {
		known = append(known, rt.table)
	}
	slices.Sort(known)
	if !slices.Equal(tables, known) {
		t.Fatalf("Migrate creates %v; Reset empties %v", tables, known)
	}

	// A row in every table: an ordered message (its key and queue entry), an inbox entry, a
	// job run, a pause, a rate limit's bucket.
	if err := outbox.InTx(ctx, db, func(tx *sql.Tx) error {
		if _, err := outbox.Enqueue(ctx, tx, outbox.Message{EventType: "e", Payload: []byte(`{}`), OrderingKey: "k"}); err != nil {
			return err
		}
		_, err := outbox.Once(ctx, tx, "consumer", "key")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO outbox_job_runs (job, period_start, started_at, finished_at) VALUES ('j', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))`); err != nil {
		t.Fatal(err)
	}
	if err := outbox.Pause(ctx, db, "e", outbox.PauseOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO outbox_rate_limits (event_type, tokens, refilled_at) VALUES ('e', 1, UTC_TIMESTAMP(6))`); err != nil {
		t.Fatal(err)
	}
	count := func(table string) (n int) {
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, table := range known {
		if count(table) == 0 {
			t.Fatalf("fixture wrote no row into %s", table)
		}
	}
	Reset(t, db)
	for _, table := range known {
		if n := count(table); n != 0 {
			t.Errorf("after Reset %s holds %d rows", table, n)
		}
	}
}
