package cli

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/outboxgen/outboxgen/internal/testdb"
	"github.com/outboxgen/outboxgen/runtime/outbox"
)

func TestMigrateTwice(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	for i := 0; i < 2; i++ {
		r := runOps(runMigrate, "--dsn", db.DSN)
		mustExit(t, r, opsExitOK)
		if !strings.Contains(r.stdout, "schema applied") {
			t.Errorf("migrate #%d: %s", i+1, r)
		}
	}
	for _, table := range []string{"outbox_messages", "outbox_inbox", "outbox_job_runs"} {
		var n int
		if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = ? AND table_name = ?", db.Name, table).Scan(&n); err != nil || n != 1 {
			t.Errorf("table %s after migrate: count %d, err %v", table, n, err)
		}
	}
	// The migrated table works for the other commands.
	r := runOps(runStatus, "--dsn", db.DSN, "--check")
	mustExit(t, r, opsExitOK)
}

// On tables of a later schema version, migrate and schema --upgrade succeed and say so when
// their min lets this outboxgen run on them (an additive change), and fail naming both
// versions when it does not.
func TestMigrateOnNewerTables(t *testing.T) {
	t.Parallel()
	next := outbox.SchemaVersion + 1
	markAll := func(db *testdb.DB, comment string) {
		schemas, err := outbox.TableSchemas(context.Background(), db.DB)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range schemas {
			db.MustExec(t, fmt.Sprintf("ALTER TABLE %s COMMENT = '%s'", s.Table, comment))
		}
	}
	db := testdb.Migrated(t)
	markAll(db, fmt.Sprintf("outboxgen schema %d min %d", next, outbox.SchemaVersion))
	want := fmt.Sprintf("schema version %d (min %d), newer than this outboxgen's %d, which may run on them", next, outbox.SchemaVersion, outbox.SchemaVersion)
	r := runOps(runMigrate, "--dsn", db.DSN)
	mustExit(t, r, opsExitOK)
	if !strings.Contains(r.stdout, "the tables are at "+want) {
		t.Errorf("migrate on additive newer tables: %s\nwant %q", r, want)
	}
	r = runOps(runSchema, "--upgrade", "--dsn", db.DSN)
	mustExit(t, r, opsExitOK)
	if !strings.Contains(r.stdout, "at "+want+": nothing to do") {
		t.Errorf("schema --upgrade on additive newer tables: %s\nwant %q", r, want)
	}

	markAll(db, fmt.Sprintf("outboxgen schema %d min %d", next, next))
	want = fmt.Sprintf("at schema version %d, newer than this outboxgen's %d: only outboxgen schema version %d or later may run on them", next, outbox.SchemaVersion, next)
	for name, r := range map[string]opsResult{
		"migrate":          runOps(runMigrate, "--dsn", db.DSN),
		"schema --upgrade": runOps(runSchema, "--upgrade", "--dsn", db.DSN),
	} {
		mustExit(t, r, opsExitDB)
		if !strings.Contains(r.stderr, want) {
			t.Errorf("%s on tables marked min %d: %s\nwant %q", name, next, r, want)
		}
	}
}
