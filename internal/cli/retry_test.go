package cli

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/internal/testdb"
	"github.com/outboxgen/outboxgen/runtime/outbox"
)

func TestRetry(t *testing.T) {
	t.Parallel()
	db := testdb.Migrated(t)
	f := fixtures{t: t, db: db}
	a1 := f.failed("a", 600, "a1 broke")
	a2 := f.failed("a", 700, "a2 broke")
	f.failed("a", 5*86400, "a3 broke long ago")
	b1 := f.failed("b", 600, "b1 broke")
	b2 := f.failed("b", 800, "b2 broke")
	pending := f.enqueue("a")
	dsn := db.DSN

	// Dry run by id: lists it, changes nothing.
	r := runOps(runRetry, "--dsn", dsn, "--id", fmt.Sprint(a1), "--dry-run")
	mustExit(t, r, opsExitOK)
	if !strings.Contains(r.stdout, "would retry 1 message(s)") || !strings.Contains(r.stdout, "a1 broke") || strings.Contains(r.stdout, "a2 broke") {
		t.Errorf("dry run by id: %s", r)
	}
	if st, _, _ := f.status(a1); st != "FAILED" {
		t.Fatalf("dry run moved a1 to %s", st)
	}

	// By id, for real: PENDING, attempts reset, failed_at cleared.
	r = runOps(runRetry, "--dsn", dsn, "--id", fmt.Sprint(a1))
	mustExit(t, r, opsExitOK)
	if !strings.Contains(r.stdout, "retried 1 message(s)") {
		t.Errorf("retry by id: %s", r)
	}
	if st, attempts, failedAt := f.status(a1); st != "PENDING" || attempts != 0 || failedAt.Valid {
		t.Errorf("a1 after retry: %s attempts=%d failed_at=%v; want PENDING, 0, NULL", st, attempts, failedAt)
	}

	// Ids that are not FAILED (a1 now, a PENDING row, one that does not exist) are counted out loud.
	r = runOps(runRetry, "--dsn", dsn, "--id", fmt.Sprint(a1), "--id", fmt.Sprint(pending), "--id", "999999", "--id", fmt.Sprint(a2), "--id", fmt.Sprint(a2))
	mustExit(t, r, opsExitOK)
	if !strings.Contains(r.stdout, "retried 1 message(s)") || !strings.Contains(r.stdout, "3 of the 4 given id(s) did not match") {
		t.Errorf("retry with non-matching ids: %s", r)
	}

	// By type with dry run: both b rows listed, nothing moves; then for real.
	r = runOps(runRetry, "--dsn", dsn, "--event-type", "b", "--dry-run")
	mustExit(t, r, opsExitOK)
	if !strings.Contains(r.stdout, "would retry 2 message(s)") || !strings.Contains(r.stdout, "b1 broke") || !strings.Contains(r.stdout, "b2 broke") ||
		strings.Contains(r.stdout, "a3") {
		t.Errorf("dry run by type: %s", r)
	}
	if n := f.countByStatus("FAILED"); n != 3 {
		t.Fatalf("FAILED rows after a dry run = %d, want 3 (a3, b1, b2)", n)
	}
	r = runOps(runRetry, "--dsn", dsn, "--event-type", "b")
	mustExit(t, r, opsExitOK)
	if !strings.Contains(r.stdout, "retried 2 message(s)") {
		t.Errorf("retry by type: %s", r)
	}
	for _, id := range []outbox.MessageID{b1, b2} {
		if st, _, _ := f.status(id); st != "PENDING" {
			t.Errorf("b row %d is %s after retry by type, want PENDING", id, st)
		}
	}

	// --failed-since: a3 failed 5 days ago, outside 1d, inside 7d and an RFC 3339 time 6 days back.
	r = runOps(runRetry, "--dsn", dsn, "--failed-since", "1d")
	mustExit(t, r, opsExitOK)
	if !strings.Contains(r.stdout, "retried 0 message(s)") {
		t.Errorf("--failed-since 1d: %s", r)
	}
	since := time.Now().UTC().Add(-6 * 24 * time.Hour).Format(time.RFC3339)
	r = runOps(runRetry, "--dsn", dsn, "--failed-since", since, "--event-type", "a", "--dry-run")
	mustExit(t, r, opsExitOK)
	if !strings.Contains(r.stdout, "would retry 1 message(s)") || !strings.Contains(r.stdout, "a3 broke long ago") {
		t.Errorf("--failed-since %s --dry-run: %s", since, r)
	}
	r = runOps(runRetry, "--dsn", dsn, "--failed-since", "7d")
	mustExit(t, r, opsExitOK)
	if !strings.Contains(r.stdout, "retried 1 message(s)") {
		t.Errorf("--failed-since 7d: %s", r)
	}
	if n := f.countByStatus("FAILED"); n != 0 {
		t.Errorf("FAILED rows at the end = %d, want 0", n)
	}
}

// "outboxgen retry 6" and "outboxgen purge 6": the answer says how to give the id.
func TestRetryAndPurgeBareIDSuggestFlag(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		run  func([]string, io.Writer, io.Writer) int
		args []string
		want string
	}{
		{runRetry, []string{"6"}, "outboxgen retry: give ids with --id: outboxgen retry --id 6 (see outboxgen retry -h)\n"},
		{runRetry, []string{"--dry-run", "12", "13"}, "outboxgen retry: give ids with --id: outboxgen retry --id 12 (see outboxgen retry -h)\n"},
		{runPurge, []string{"--status", "FAILED", "6"}, "outboxgen purge: give ids with --id: outboxgen purge --id 6 (see outboxgen purge -h)\n"},
		{runRetry, []string{"abc"}, "outboxgen retry: retry takes no arguments (got 1); the database goes in --dsn or $OUTBOX_DSN (see outboxgen retry -h)\n"},
	} {
		var out, errb bytes.Buffer
		if code := tc.run(tc.args, &out, &errb); code != opsExitUsage || errb.String() != tc.want {
			t.Errorf("%v: exit %d, stderr %q; want %d, %q", tc.args, code, errb.String(), opsExitUsage, tc.want)
		}
	}
}
