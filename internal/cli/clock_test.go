package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/outboxgen/outboxgen/internal/testdb"
)

// dsnBehind returns a DSN for db whose sessions see the database clock behind by hours: the
// driver sends `SET timestamp` at each connect, which fixes NOW() and UTC_TIMESTAMP() for the
// session at that instant.
func dsnBehind(t *testing.T, db *testdb.DB, hours int) string {
	t.Helper()
	var behind string
	if err := db.QueryRow("SELECT UNIX_TIMESTAMP(NOW(6)) - ?", hours*3600).Scan(&behind); err != nil {
		t.Fatal(err)
	}
	sep := "?"
	if strings.Contains(db.DSN, "?") {
		sep = "&"
	}
	return db.DSN + sep + "timestamp=" + behind
}

// --window and --failed-since end now on the database clock, which wrote failed_at. With the
// database two hours behind this machine, a failure a minute old (on its clock) was outside a
// window of an hour measured here: status --check said ok.
func TestWindowUsesTheDatabaseClock(t *testing.T) {
	t.Parallel()
	db := testdb.Migrated(t)
	f := fixtures{t: t, db: db}
	// On the command's database clock, two hours behind: one failed a minute ago, one 61
	// minutes ago.
	f.failed("late", 2*3600+60, "a minute ago")
	f.failed("late", 2*3600+61*60, "an hour and a minute ago")
	dsn := dsnBehind(t, db, 2)

	r := runOps(runStatus, "--dsn", dsn, "--check", "--window", "1h")
	mustExit(t, r, opsExitCheck)
	if !strings.Contains(r.stdout, "failed in 1h:    1\n") || !strings.Contains(r.stdout, "check: FAILING: 1 message(s) FAILED within the last 1h") {
		t.Errorf("status --check, database 2h behind:\n%s", r)
	}
	r = runOps(runStatus, "--dsn", dsn, "--json", "--window", "1h")
	mustExit(t, r, opsExitOK)
	var rep statusReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || rep.Check.FailedInWindow != 1 {
		t.Errorf("status --json failed_in_window = %d, %v; want 1", rep.Check.FailedInWindow, err)
	}
	r = runOps(runRetry, "--dsn", dsn, "--failed-since", "1h", "--dry-run")
	mustExit(t, r, opsExitOK)
	if !strings.Contains(r.stdout, "would retry 1 message(s)") || !strings.Contains(r.stdout, "a minute ago") {
		t.Errorf("retry --failed-since 1h, database 2h behind:\n%s", r)
	}
}
