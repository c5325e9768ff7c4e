package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/outboxgen/outboxgen/internal/testdb"
)

// status says on one line how old the oldest SENT row kept is, and what deletes it; --json
// gives the age in seconds.
func TestStatusOldestSent(t *testing.T) {
	t.Parallel()
	db := testdb.Migrated(t)
	f := fixtures{t: t, db: db}
	r := runOps(runStatus, "--dsn", db.DSN)
	mustExit(t, r, opsExitOK)
	if !strings.Contains(r.stdout, "oldest sent:     - (retention: workers delete SENT rows after Config.Retention.Sent, 24h by default)") {
		t.Errorf("status of an empty table:\n%s", r.stdout)
	}
	f.sent("t", 3*3600)
	f.sent("t", 60)
	r = runOps(runStatus, "--dsn", db.DSN)
	mustExit(t, r, opsExitOK)
	if !strings.Contains(r.stdout, "oldest sent:     3h (retention:") {
		t.Errorf("status with a SENT row 3h old:\n%s", r.stdout)
	}
	r = runOps(runStatus, "--dsn", db.DSN, "--json")
	mustExit(t, r, opsExitOK)
	var rep statusReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.OldestSentSeconds < 3*3600 || rep.OldestSentSeconds > 3*3600+60 {
		t.Errorf("oldest_sent_seconds = %v, want about 10800", rep.OldestSentSeconds)
	}
}
