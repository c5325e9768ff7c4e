package cli

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/outboxgen/outboxgen/internal/testdb"
	"github.com/outboxgen/outboxgen/queries"
	"github.com/outboxgen/outboxgen/runtime/outbox"
)

func TestSchemaPrintsTheDDL(t *testing.T) {
	r := runOps(runSchema)
	mustExit(t, r, opsExitOK)
	if r.stdout != outbox.Schema() {
		t.Errorf("schema printed %d bytes, want outbox.Schema() (%d bytes)", len(r.stdout), len(outbox.Schema()))
	}
	mustExit(t, runOps(runSchema, "--dsn", "u:p@tcp(127.0.0.1:1)/x"), opsExitUsage)
}

// schema --upgrade on a database made by the first release prints the ALTERs it needs; after
// migrate, it prints that nothing is left.
func TestSchemaUpgradeOnVersion1(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	v1, err := os.ReadFile("../../runtime/outbox/testdata/schema_v1.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range queries.Split(string(v1)) {
		db.MustExec(t, stmt)
	}
	r := runOps(runSchema, "--upgrade", "--dsn", db.DSN)
	mustExit(t, r, opsExitOK)
	if n := strings.Count(r.stdout, "ALTER TABLE "); n != 19 || !strings.Contains(r.stdout, "MODIFY payload LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin") ||
		!strings.Contains(r.stdout, "ADD COLUMN headers") || strings.Count(r.stdout, "CREATE TABLE IF NOT EXISTS outbox_ordering") != 2 {
		t.Errorf("schema --upgrade on version 1 printed %d ALTER TABLEs:\n%s\nwant the 19 of versions 2 to 6 and the 2 ordering tables", n, r.stdout)
	}
	mustExit(t, runOps(runMigrate, "--dsn", db.DSN), opsExitOK)
	r = runOps(runSchema, "--upgrade", "--dsn", db.DSN)
	mustExit(t, r, opsExitOK)
	if !strings.Contains(r.stdout, fmt.Sprintf("schema version %d: nothing to do", outbox.SchemaVersion)) {
		t.Errorf("schema --upgrade after migrate: %s", r)
	}
	// On an empty database: the CREATE TABLEs.
	empty := testdb.New(t)
	r = runOps(runSchema, "--upgrade", "--dsn", empty.DSN)
	mustExit(t, r, opsExitOK)
	if n := strings.Count(r.stdout, "CREATE TABLE IF NOT EXISTS "); n != 7 {
		t.Errorf("schema --upgrade on an empty database printed %d CREATE TABLEs, want 7:\n%s", n, r.stdout)
	}
}
