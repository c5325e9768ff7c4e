package cli

import (
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
