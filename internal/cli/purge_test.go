package cli

import (
	"fmt"
	"strings"
	"testing"

	"github.com/outboxgen/outboxgen/internal/testdb"
)

func TestPurge(t *testing.T) {
	t.Parallel()
	db := testdb.Migrated(t)
	f := fixtures{t: t, db: db}
	day := 86400
	for i := 0; i < 5; i++ {
		f.sent("a", 10*day+i)
	}
	f.sent("a", 3600)
	f.sent("b", 3600)
	f.failed("a", 10*day, "old")
	f.failed("a", 3600, "new")
	f.enqueue("a")
	f.processing("a", 10, 300)
	dsn := db.DSN

	r := runOps(runPurge, "--dsn", dsn, "--older-than", "7d", "--batch-size", "2")
	mustExit(t, r, opsExitOK)
	if !strings.Contains(r.stdout, "purged 5 SENT message(s) older than 7d") {
		t.Errorf("purge sent 7d: %s", r)
	}
	if n := f.countByStatus("SENT"); n != 2 {
		t.Errorf("SENT left = %d, want 2", n)
	}
	if n := f.countByStatus("FAILED"); n != 2 {
		t.Errorf("FAILED left = %d, want 2 (purge of SENT leaves them)", n)
	}

	r = runOps(runPurge, "--dsn", dsn, "--older-than", "1d12h", "--status", "failed")
	mustExit(t, r, opsExitOK)
	if !strings.Contains(r.stdout, "purged 1 FAILED message(s)") {
		t.Errorf("purge failed: %s", r)
	}

	r = runOps(runPurge, "--dsn", dsn, "--older-than", "30m", "--force")
	mustExit(t, r, opsExitOK)
	if !strings.Contains(r.stdout, "purged 2 SENT message(s)") {
		t.Errorf("purge sent 30m: %s", r)
	}
	// PENDING and PROCESSING rows are never purged.
	if p, q := f.countByStatus("PENDING"), f.countByStatus("PROCESSING"); p != 1 || q != 1 {
		t.Errorf("PENDING=%d PROCESSING=%d after purges, want 1 and 1", p, q)
	}
	r = runOps(runPurge, "--dsn", dsn, "--older-than", "0", "--force")
	mustExit(t, r, opsExitOK)
	if !strings.Contains(r.stdout, "purged 0 SENT message(s)") {
		t.Errorf("purge with nothing left: %s", r)
	}
}

// A window under an hour, or 0 (everything of the status), needs --force: 7s is one key from
// 7d, and it deleted every FAILED message without a word. --dry-run and --id never need it.
func TestPurgeFloorNeedsForce(t *testing.T) {
	t.Parallel()
	db := testdb.Migrated(t)
	f := fixtures{t: t, db: db}
	for i := 0; i < 5; i++ {
		f.failed("a", 60, "x")
	}
	one := f.failed("a", 60, "x")
	dsn := db.DSN
	for _, tc := range []struct{ olderThan, want string }{
		{"7s", "outboxgen purge: --older-than 7s purges FAILED messages only 7s old: a window under 1h needs --force (days are written 7d; --dry-run counts them) (see outboxgen purge -h)\n"},
		{"59m59s", "a window under 1h needs --force"},
		{"0", "outboxgen purge: --older-than 0 purges every FAILED message; add --force if that is what you mean (--dry-run counts them) (see outboxgen purge -h)\n"},
		{"0s", "--older-than 0 purges every FAILED message"},
	} {
		r := runOps(runPurge, "--dsn", dsn, "--status", "failed", "--older-than", tc.olderThan)
		mustExit(t, r, opsExitUsage)
		if !strings.Contains(r.stderr, tc.want) || r.stdout != "" {
			t.Errorf("purge --older-than %s: want %q on stderr:\n%s", tc.olderThan, tc.want, r)
		}
	}
	if n := f.countByStatus("FAILED"); n != 6 {
		t.Fatalf("FAILED left = %d, want 6: a refused purge deleted rows", n)
	}
	r := runOps(runPurge, "--dsn", dsn, "--status", "failed", "--older-than", "7s", "--dry-run")
	mustExit(t, r, opsExitOK)
	if !strings.Contains(r.stdout, "would purge 6 FAILED message(s) older than 7s") {
		t.Errorf("dry run: %s", r)
	}
	r = runOps(runPurge, "--dsn", dsn, "--status", "failed", "--id", fmt.Sprint(one))
	mustExit(t, r, opsExitOK)
	r = runOps(runPurge, "--dsn", dsn, "--status", "failed", "--older-than", "1h")
	mustExit(t, r, opsExitOK)
	if !strings.Contains(r.stdout, "purged 0 FAILED message(s) older than 1h") {
		t.Errorf("purge --older-than 1h: %s", r)
	}
	r = runOps(runPurge, "--dsn", dsn, "--status", "failed", "--older-than", "7s", "--force")
	mustExit(t, r, opsExitOK)
	if !strings.Contains(r.stdout, "purged 5 FAILED message(s) older than 7s") || f.countByStatus("FAILED") != 0 {
		t.Errorf("purge --older-than 7s --force: %s", r)
	}
}
