package outbox

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/outboxgen/outboxgen/internal/testdb"
)

// appUser creates a user with only SELECT, INSERT, UPDATE and DELETE on d's database, as an
// application runs after a DBA applied the schema, and opens a pool as that user.
func appUser(t *testing.T, d *testdb.DB) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", d.User(t, "App-Pw-7f3a", "SELECT, INSERT, UPDATE, DELETE"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// Apps call Migrate at startup, often as a user without CREATE once a DBA applied the schema.
func TestMigrateWithoutCreatePrivilege(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	applied := testdb.Migrated(t)
	if err := Migrate(ctx, appUser(t, applied)); err != nil {
		t.Fatalf("Migrate as a SELECT/INSERT/UPDATE/DELETE user over existing tables: %v, want nil", err)
	}

	// One table missing: that one needs CREATE, and the error says so.
	partial := testdb.Migrated(t)
	partial.MustExec(t, "DROP TABLE outbox_job_runs")
	err := Migrate(ctx, appUser(t, partial))
	if err == nil || !strings.Contains(err.Error(), "CREATE TABLE outbox_job_runs: ") || !strings.Contains(err.Error(), "CREATE command denied") {
		t.Fatalf("Migrate as a user without CREATE, outbox_job_runs missing: err = %v, want the CREATE TABLE outbox_job_runs privilege error", err)
	}
}

// A table of the same name from before outboxgen must fail Migrate, not every later query.
func TestMigrateRejectsTableWithMissingColumns(t *testing.T) {
	t.Parallel()
	d := testdb.New(t)
	d.MustExec(t, `CREATE TABLE outbox_messages (
		id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
		event_type VARCHAR(191) NOT NULL,
		payload JSON NOT NULL,
		status VARCHAR(20) NOT NULL)`)
	err := Migrate(context.Background(), d.DB)
	want := "outbox: Migrate: table outbox_messages predates or does not match outboxgen's schema: it lacks columns " +
		"idempotency_key, attempts, max_attempts, next_attempt_at, claimed_at, reclaim_after, claim_token, last_error, created_at, sent_at, failed_at"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("Migrate over a legacy outbox_messages: err = %v\nwant it to start with %q", err, want)
	}
	// The missing tables were still created.
	var n int
	if err := d.QueryRow("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME IN ('outbox_inbox', 'outbox_job_runs')").Scan(&n); err != nil || n != 2 {
		t.Fatalf("tables created beside the legacy one: %d (%v), want 2", n, err)
	}
}

// The column check reads its columns from the DDL; this keeps that parse honest against the
// tables the DDL actually creates.
func TestSchemaTablesMatchCreatedTables(t *testing.T) {
	t.Parallel()
	d := testdb.New(t)
	if err := Migrate(context.Background(), d.DB); err != nil {
		t.Fatal(err)
	}
	tables, err := schemaTables()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tb := range tables {
		names = append(names, tb.name)
		got := queryStrings(t, d, "SELECT LOWER(COLUMN_NAME) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION", tb.name)
		var cols []string
		for _, c := range tb.columns {
			cols = append(cols, c.name)
		}
		if !slices.Equal(got, cols) {
			t.Errorf("table %s: columns parsed from the DDL %v, created %v", tb.name, tb.columns, got)
		}
	}
	slices.Sort(names)
	if got := queryStrings(t, d, "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() ORDER BY TABLE_NAME"); !slices.Equal(got, names) {
		t.Errorf("tables parsed from the DDL %v, created %v", names, got)
	}
}

func queryStrings(t *testing.T, d *testdb.DB, query string, args ...any) []string {
	t.Helper()
	rows, err := d.Query(query, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// Callers log Migrate's error (often with log.Fatal): it must be one line naming the
// statement, not the statement's 20 lines of DDL.
func TestMigrateErrorIsOneLine(t *testing.T) {
	t.Parallel()
	cfg, err := mysql.ParseDSN(testdb.ServerDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.DBName, cfg.ParseTime, cfg.Loc = "", true, time.UTC // no database selected
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = Migrate(context.Background(), db)
	if err == nil || strings.Contains(err.Error(), "\n") ||
		!strings.HasPrefix(err.Error(), "outbox: Migrate: CREATE TABLE outbox_messages: ") || !strings.Contains(err.Error(), "No database selected") {
		t.Fatalf("Migrate with no database selected: err = %q, want one line \"outbox: Migrate: CREATE TABLE outbox_messages: ... No database selected\"", err)
	}
}

// Migrate names each column whose type or collation is wrong in a table that claims to be
// current, rather than letting keys compare case-blind.
func TestMigrateChecksTypesAndCollations(t *testing.T) {
	t.Parallel()
	d := testdb.Migrated(t)
	d.MustExec(t, "ALTER TABLE outbox_inbox MODIFY idem_key VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL")
	d.MustExec(t, "ALTER TABLE outbox_messages MODIFY payload LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL")
	err := Migrate(context.Background(), d.DB)
	for _, want := range []string{
		"column outbox_inbox.idem_key is varchar(191) collate utf8mb4_general_ci, want varbinary(764)",
		"column outbox_messages.payload has collation utf8mb4_general_ci, want utf8mb4_bin",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Migrate over altered columns: err = %v\nwant it to contain %q", err, want)
		}
	}
	if err != nil && strings.Contains(err.Error(), "\n") {
		t.Errorf("Migrate's error spans lines: %q", err)
	}
}

// A table from a newer outboxgen is not downgraded or touched.
func TestMigrateRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	d := testdb.Migrated(t)
	d.MustExec(t, "ALTER TABLE outbox_messages COMMENT = 'outboxgen schema 99'")
	err := Migrate(context.Background(), d.DB)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("table outbox_messages is at schema version 99, newer than this outboxgen's %d", SchemaVersion)) {
		t.Errorf("Migrate over a newer table: err = %v", err)
	}
}
