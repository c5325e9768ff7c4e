package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/outboxgen/outboxgen/internal/testdb"
	"github.com/outboxgen/outboxgen/runtime/outbox"
)

func TestBadFlagsExit2(t *testing.T) {
	t.Setenv(envDSN, "") // not parallel: t.Setenv
	dsn := "u:pw@tcp(127.0.0.1:1)/x"
	cases := []struct {
		fn   opsFunc
		args []string
		want string // in stderr
	}{
		{runStatus, []string{"--dsn", dsn, "--nope"}, "flag provided but not defined: -nope"},
		{runStatus, []string{"--dsn", dsn, "--window", "0"}, "--window must be positive"},
		{runStatus, []string{"--dsn", dsn, "--window", "soon"}, "invalid duration"},
		{runStatus, []string{"--dsn", dsn, "--failed", "-1"}, "--failed must be >= 0"},
		{runStatus, []string{"--dsn", dsn, "extra"}, "takes no arguments"},
		{runStatus, nil, "no database: pass --dsn or set OUTBOX_DSN"},
		{runRetry, []string{"--dsn", dsn}, "say which messages"},
		{runRetry, []string{"--dsn", dsn, "--id", "x"}, "want a positive message id"},
		{runRetry, []string{"--dsn", dsn, "--id", "0"}, "want a positive message id"},
		{runRetry, []string{"--dsn", dsn, "--failed-since", "yesterday"}, "RFC 3339"},
		{runRetry, []string{"--dsn", dsn, "--failed-since", "-1h"}, "must be positive"},
		{runPurge, []string{"--dsn", dsn}, "say what to delete: --older-than D"},
		{runPurge, []string{"--dsn", dsn, "--older-than", "7x"}, "invalid duration"},
		{runPurge, []string{"--dsn", dsn, "--older-than", "-7d"}, "must not be negative"},
		{runPurge, []string{"--dsn", dsn, "--older-than", "7d", "--status", "pending"}, "--status must be sent, failed or cancelled"},
		{runPurge, []string{"--dsn", dsn, "--older-than", "7d", "--batch-size", "-1"}, "--batch-size must be between 0 and"},
		{runMigrate, []string{"--dsn", dsn, "now"}, "takes no arguments"},
		{runMigrate, []string{"--dsn", "not a dsn"}, "invalid DSN"},
	}
	for _, c := range cases {
		r := runOps(c.fn, c.args...)
		if r.code != opsExitUsage || !strings.Contains(r.stderr, c.want) || r.stdout != "" {
			t.Errorf("%v: want exit 2, %q in stderr and empty stdout; got %s", c.args, c.want, r)
		}
	}
	// -h is not an error: help on stdout, exit 0, and it says how the DSN is completed.
	for _, fn := range []opsFunc{runStatus, runRetry, runPurge, runMigrate} {
		r := runOps(fn, "-h")
		if r.code != opsExitOK || !strings.Contains(r.stdout, "usage: outboxgen") || !strings.Contains(r.stdout, "parseTime=true and loc=UTC") {
			t.Errorf("-h: %s", r)
		}
	}
}

// Through the dispatcher, as cmd/outboxgen runs it; and a reachable database whose query fails
// (no schema) is exit 3 with one line too.
func TestOpsThroughMainAndFailingDatabase(t *testing.T) {
	t.Parallel()
	db := testdb.New(t) // no tables
	for _, args := range [][]string{
		{"status", "--dsn", db.DSN},
		{"retry", "--dsn", db.DSN, "--event-type", "a"},
		{"purge", "--dsn", db.DSN, "--older-than", "1d"},
	} {
		var out, errb bytes.Buffer
		code := Main(args, &out, &errb)
		lines := strings.Split(strings.TrimSuffix(errb.String(), "\n"), "\n")
		if code != opsExitDB || len(lines) != 1 || !strings.HasPrefix(lines[0], "outboxgen "+args[0]+": ") ||
			!strings.Contains(lines[0], "doesn't exist") || !strings.Contains(lines[0], "(database ") {
			t.Errorf("%v: want exit 3 and one line naming the database and the missing table; got exit %d\nstdout: %s\nstderr: %s",
				args, code, out.String(), errb.String())
		}
	}
	var out, errb bytes.Buffer
	if code := Main([]string{"migrate", "--dsn", db.DSN}, &out, &errb); code != opsExitOK {
		t.Fatalf("migrate through Main: exit %d: %s", code, errb.String())
	}
	out.Reset()
	if code := Main([]string{"status", "--dsn", db.DSN, "--check", "--json"}, &out, &errb); code != opsExitOK {
		t.Errorf("status --check on a fresh table through Main: exit %d: %s %s", code, out.String(), errb.String())
	}
}

// A bad flag value before --dsn is cleaned too: parsing stops at the bad flag, before --dsn.
func TestBadFlagBeforeDSNIsCleaned(t *testing.T) {
	t.Parallel()
	const pw = "Heron-Kettle-5150-secret"
	for _, args := range [][]string{
		{"--window", pw, "--dsn", "app:" + pw + "@tcp(127.0.0.1:1)/shop"},
		{"-window=" + pw, "-dsn=app:" + pw + "@tcp(127.0.0.1:1)/shop"},
	} {
		r := runOps(runStatus, args...)
		if r.code != opsExitUsage || strings.Contains(r.stdout+r.stderr, "Heron") || !strings.Contains(r.stderr, "*****") {
			t.Errorf("%q: want exit 2 and the value masked: %s", args[0], r)
		}
		if lines := strings.Count(strings.TrimSpace(r.stderr), "\n") + 1; lines != 1 {
			t.Errorf("%q: want one line on stderr, got %d: %s", args[0], lines, r)
		}
	}
}

// Bad values are usage errors (2) found before connecting, and a DSN without a database is one.
func TestUsageErrorsBeforeConnecting(t *testing.T) {
	t.Parallel()
	unreachable := "u:p@tcp(127.0.0.1:1)/x"
	for _, c := range []struct {
		fn   opsFunc
		args []string
		want string
	}{
		{runPurge, []string{"--dsn", unreachable, "--older-than", "7d", "--batch-size", "3000000000"}, "--batch-size must be between"},
		{runStatus, []string{"--dsn", "u:p@tcp(127.0.0.1:1)/"}, "names no database"},
		{runStatus, []string{"--dsn", unreachable, "--max-due-age", "-5m"}, "--max-due-age must not be negative"},
		{runPurge, append([]string{"--dsn", unreachable, "--status", "failed"}, manyIDs(maxOpsIDs+1)...), "at most 10000 --id"},
		{runRetry, append([]string{"--dsn", unreachable}, manyIDs(maxOpsIDs+1)...), "at most 10000 --id"},
	} {
		r := runOps(c.fn, c.args...)
		if r.code != opsExitUsage || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v: want exit 2 and %q, got %s", c.args, c.want, r)
		}
	}
}

// An interrupted command (Ctrl-C: the command's context cancelled) exits 130, not 3.
func TestInterruptedIsNotADatabaseFailure(t *testing.T) {
	t.Parallel()
	var out, errb bytes.Buffer
	c := newOpsCmd("purge", purgeHelp, &out, &errb)
	ctx, cancel := context.WithCancel(context.Background())
	c.ctx = ctx
	if code := c.dbErr("purge", errors.New("outbox: Purge: db down")); code != opsExitDB {
		t.Errorf("a failure while running: exit %d, want %d", code, opsExitDB)
	}
	cancel()
	errb.Reset()
	if code := c.dbErr("purge", fmt.Errorf("outbox: Purge: %w", context.Canceled)); code != opsExitInterrupted || !strings.Contains(errb.String(), "interrupted") {
		t.Errorf("after cancel: exit %d, stderr %q; want %d and 'interrupted'", code, errb.String(), opsExitInterrupted)
	}
}

// The on-call path for one bad message: show it whole, retry names what did not match, a typo'd
// event type says so, and purge --id discards exactly the FAILED one.
func TestShowRetryMissesAndPurgeByID(t *testing.T) {
	t.Parallel()
	db := testdb.Migrated(t)
	f := fixtures{t: t, db: db}
	stack := "panic: boom\n" + strings.Repeat("goroutine 9 [running]: main.handle() /src/main.go:42 +0x5e\n", 20) + "END OF STACK"
	failed := f.failed("welcome_email", 60, stack)
	db.MustExec(t, `UPDATE outbox_messages SET payload = '{"company_id":42,"email":"a@example.com"}' WHERE id = ?`, failed)
	pending := f.enqueue("welcome_email")
	hand := f.enqueue("welcome_email") // made FAILED by hand, without failed_at
	db.MustExec(t, "UPDATE outbox_messages SET status='FAILED' WHERE id = ?", hand)

	r := runOps(runShow, "--dsn", db.DSN, "--id", fmt.Sprint(failed))
	mustExit(t, r, opsExitOK)
	if !strings.Contains(r.stdout, "END OF STACK") || !strings.Contains(r.stdout, "status           FAILED") || !regexp.MustCompile(`\n    \{.*"company_id": ?42[,}]`).MatchString(r.stdout) {
		t.Errorf("show: want the whole last_error, the status and the payload:\n%s", r)
	}
	r = runOps(runShow, "--dsn", db.DSN, "--id", fmt.Sprint(failed), "--json")
	mustExit(t, r, opsExitOK)
	var rec outbox.Record
	if err := json.Unmarshal([]byte(r.stdout), &rec); err != nil || rec.ID != failed || rec.LastError != stack || rec.Status != outbox.StatusFailed {
		t.Errorf("show --json = %+v, %v", rec, err)
	}
	r = runOps(runShow, "--dsn", db.DSN, "--id", "999999")
	if r.code != opsExitCheck || !strings.Contains(r.stderr, "no message 999999") {
		t.Errorf("show of a missing id: %s", r)
	}

	r = runOps(runRetry, "--dsn", db.DSN, "--id", fmt.Sprint(failed), "--id", fmt.Sprint(pending), "--id", "999999", "--dry-run")
	mustExit(t, r, opsExitOK)
	for _, want := range []string{"would retry 1 message(s)", fmt.Sprintf("  %d: PENDING, not FAILED", pending), "  999999: no such message"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("retry --dry-run with unmatched ids: want %q in:\n%s", want, r)
		}
	}
	if strings.Contains(r.stdout, fmt.Sprintf("  %d:", failed)) {
		t.Errorf("the matching id is listed as unmatched:\n%s", r)
	}
	r = runOps(runRetry, "--dsn", db.DSN, "--event-type", "welcome_emial")
	mustExit(t, r, opsExitOK)
	if !strings.Contains(r.stdout, `no FAILED message has event type "welcome_emial" (event types with FAILED messages: welcome_email)`) {
		t.Errorf("retry of a mistyped event type: %s", r)
	}
	r = runOps(runRetry, "--dsn", db.DSN, "--all", "--dry-run")
	handRow := regexp.MustCompile(fmt.Sprintf(`(?m)^%d +welcome_email +0/10 +- `, hand))
	if r.code != opsExitOK || !strings.Contains(r.stdout, "would retry 2 message(s)") || !handRow.MatchString(r.stdout) {
		t.Errorf("retry --all --dry-run: want both FAILED rows, the hand-made one too:\n%s", r)
	}
	if r := runOps(runRetry, "--dsn", db.DSN, "--all", "--event-type", "x"); r.code != opsExitUsage {
		t.Errorf("--all with a selector: want exit 2, got %s", r)
	}

	// purge --id: needs --status; discards the FAILED one only; dry run first.
	if r := runOps(runPurge, "--dsn", db.DSN, "--id", fmt.Sprint(failed)); r.code != opsExitUsage || !strings.Contains(r.stderr, "--id needs --status") {
		t.Errorf("purge --id without --status: %s", r)
	}
	args := []string{"--dsn", db.DSN, "--status", "failed", "--id", fmt.Sprint(failed), "--id", fmt.Sprint(pending)}
	r = runOps(runPurge, append(args, "--dry-run")...)
	mustExit(t, r, opsExitOK)
	if !strings.Contains(r.stdout, "would purge 1 of the 2 given FAILED message(s)") || !strings.Contains(r.stdout, fmt.Sprintf("%d: PENDING, not FAILED: left alone", pending)) ||
		f.countByStatus("FAILED") != 2 {
		t.Errorf("purge --id --dry-run:\n%s", r)
	}
	r = runOps(runPurge, args...)
	mustExit(t, r, opsExitOK)
	if !strings.Contains(r.stdout, "purged 1 of the 2 given FAILED message(s)") || f.countByStatus("FAILED") != 1 || f.countByStatus("PENDING") != 1 {
		t.Errorf("purge --id: want only the FAILED row deleted:\n%s", r)
	}
}

func manyIDs(n int) []string {
	args := make([]string, 0, 2*n)
	for i := 1; i <= n; i++ {
		args = append(args, "--id", fmt.Sprint(i))
	}
	return args
}
