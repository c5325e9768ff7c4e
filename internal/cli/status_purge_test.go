package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/outboxgen/outboxgen/internal/testdb"
)

// status prints the oldest transaction and the history list length, and --json carries them.
// A user without PROCESS gets "unknown", not an error.
func TestStatusPurgeLag(t *testing.T) {
	t.Parallel()
	db := testdb.Migrated(t)
	r := runOps(runStatus, "--dsn", db.DSN)
	mustExit(t, r, opsExitOK)
	if !strings.Contains(r.stdout, "oldest trx:      ") || !strings.Contains(r.stdout, "history list length ") {
		t.Errorf("status without the purge line:\n%s", r.stdout)
	}
	r = runOps(runStatus, "--dsn", db.DSN, "--json")
	mustExit(t, r, opsExitOK)
	var rep statusReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if !rep.Purge.Known || rep.Purge.HistoryLength < 0 {
		t.Errorf("purge = %+v, want known", rep.Purge)
	}

	app := db.User(t, "App-Pw-7f3a", "SELECT, INSERT, UPDATE, DELETE")
	r = runOps(runStatus, "--dsn", app)
	mustExit(t, r, opsExitOK)
	if !strings.Contains(r.stdout, "oldest trx:      unknown (reading it needs the PROCESS privilege)") {
		t.Errorf("status as a user without PROCESS:\n%s", r.stdout)
	}
}

// A long transaction is named with its thread, user and host, each kept inert.
func TestPurgeLine(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		p    purgeReport
		want string
	}{
		{purgeReport{}, "oldest trx:      unknown (reading it needs the PROCESS privilege)\n"},
		{purgeReport{Known: true, HistoryLength: 7}, "oldest trx:      - (history list length 7)\n"},
		{purgeReport{Known: true, HistoryLength: 7, TransactionsUnreadable: true},
			"oldest trx:      unknown (MySQL cannot list transactions while one runs a statement with an emoji or another 4-byte character; history list length 7)\n"},
		{purgeReport{Known: true, ThreadID: 9, OldestTransactionSeconds: 3, HistoryLength: 7}, "oldest trx:      3s (history list length 7)\n"},
		{purgeReport{Known: true, ThreadID: 9, OldestTransactionSeconds: 725, User: "rep\x1b[2Jorts", Host: "10.0.0.5:5123", HistoryLength: 123456},
			"oldest trx:      12m5s, thread 9 rep\\x1b[2Jorts@10.0.0.5:5123: InnoDB cannot purge while it is open, so claims slow down (history list length 123456; see docs/operations.md \"A long transaction\")\n"},
		{purgeReport{Known: true, ThreadID: 9, OldestTransactionSeconds: 60, HistoryLength: 1},
			"oldest trx:      1m, thread 9 (user and host unknown): InnoDB cannot purge while it is open, so claims slow down (history list length 1; see docs/operations.md \"A long transaction\")\n"},
	} {
		if got := purgeLine(c.p); got != c.want {
			t.Errorf("purgeLine(%+v) =\n%q\nwant\n%q", c.p, got, c.want)
		}
	}
}
