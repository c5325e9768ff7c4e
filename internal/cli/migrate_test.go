package cli

import (
	"strings"
	"testing"

	"github.com/outboxgen/outboxgen/internal/testdb"
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
