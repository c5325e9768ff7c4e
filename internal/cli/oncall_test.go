package cli

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/internal/testdb"
	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// pause and resume: types and flags in any order, a type with no rows, --for, --reason, and
// text from the command line printed inert.
func TestPauseResume(t *testing.T) {
	t.Parallel()
	db := testdb.Migrated(t)
	ctx := context.Background()
	dsn := db.DSN

	r := runOps(runPause, "mail", "--for", "15m", "--dsn", dsn, "sms", "--reason", "provider down", "--", "-odd")
	mustExit(t, r, opsExitOK)
	if !strings.Contains(r.stdout, "paused mail for 15m") || !strings.Contains(r.stdout, "paused sms") || !strings.Contains(r.stdout, "paused -odd") {
		t.Errorf("pause: %s", r)
	}
	ps, err := outbox.Pauses(ctx, db)
	if err != nil || len(ps) != 3 {
		t.Fatalf("Pauses = %+v, %v; want 3", ps, err)
	}
	for _, p := range ps {
		if p.Reason != "provider down" || p.Until.IsZero() || p.Left > 15*time.Minute || p.Left < 14*time.Minute {
			t.Errorf("pause %+v, want the reason and about 15m left", p)
		}
	}

	r = runOps(runPause, "--dsn", dsn, "evil\x1b[2J")
	mustExit(t, r, opsExitOK)
	if strings.Contains(r.stdout, "\x1b") {
		t.Errorf("pause printed a raw escape: %q", r.stdout)
	}

	r = runOps(runResume, "sms", "--dsn", dsn, "never-paused")
	mustExit(t, r, opsExitOK)
	if !strings.Contains(r.stdout, "resumed sms") || !strings.Contains(r.stdout, "never-paused was not paused") {
		t.Errorf("resume: %s", r)
	}
	if ps, _ := outbox.Pauses(ctx, db); len(ps) != 3 {
		t.Errorf("after resume: %+v, want mail, -odd and the escape type", ps)
	}

	for _, tc := range []struct {
		fn   opsFunc
		args []string
		want string
	}{
		{runPause, []string{"--dsn", dsn}, "name at least one event type"},
		{runResume, []string{"--dsn", dsn}, "name at least one event type"},
		{runPause, []string{"--dsn", dsn, "a", "--for", "0s"}, "--for must be positive"},
		{runPause, []string{"--dsn", dsn, "a", "--for", "soon"}, "invalid value"},
		{runPause, []string{"--dsn", dsn, strings.Repeat("x", 192)}, "1 to 191 bytes"},
		{runPause, []string{"--dsn", dsn, "a", "--bogus"}, "flag provided but not defined"},
	} {
		r := runOps(tc.fn, tc.args...)
		if r.code != opsExitUsage || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: want exit %d and %q, got %s", tc.args, opsExitUsage, tc.want, r)
		}
	}
}

// cancel: the dry run changes nothing, by id and by type, misses named, argument errors; then
// purge --status cancelled deletes them.
func TestCancelCommand(t *testing.T) {
	t.Parallel()
	db := testdb.Migrated(t)
	f := fixtures{t: t, db: db}
	a1, a2, b1 := f.enqueue("a"), f.enqueue("a"), f.enqueue("b")
	sent := f.sent("a", 60)
	dsn := db.DSN

	r := runOps(runCancel, "--dsn", dsn, "--event-type", "a", "--dry-run")
	mustExit(t, r, opsExitOK)
	if !strings.Contains(r.stdout, "would cancel 2 message(s)") {
		t.Errorf("dry run: %s", r)
	}
	if n := f.countByStatus("PENDING"); n != 3 {
		t.Fatalf("%d PENDING after a dry run, want 3", n)
	}
	r = runOps(runCancel, "--dsn", dsn, "--id", fmt.Sprint(a1), "--id", fmt.Sprint(sent), "--id", "999999")
	mustExit(t, r, opsExitOK)
	if !strings.Contains(r.stdout, "cancelled 1 message(s)") || !strings.Contains(r.stdout, fmt.Sprintf("%d: SENT, left alone", sent)) ||
		!strings.Contains(r.stdout, "999999: no such message") {
		t.Errorf("cancel by id: %s", r)
	}
	r = runOps(runCancel, "--dsn", dsn, "--event-type", "a")
	mustExit(t, r, opsExitOK)
	if !strings.Contains(r.stdout, "cancelled 1 message(s)") {
		t.Errorf("cancel by type: %s", r)
	}
	for id, want := range map[outbox.MessageID]string{a1: "CANCELLED", a2: "CANCELLED", b1: "PENDING", sent: "SENT"} {
		if st, _, _ := f.status(id); st != want {
			t.Errorf("message %d is %s, want %s", id, st, want)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--dsn", dsn}, "say which messages"},
		{[]string{"--dsn", dsn, "--dry-run"}, "say which messages"},
		{[]string{"--dsn", dsn, "--id", "x"}, "positive message id"},
		{[]string{"--dsn", dsn, fmt.Sprint(b1)}, "give ids with --id"},
	} {
		r := runOps(runCancel, tc.args...)
		if r.code != opsExitUsage || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: want exit %d and %q, got %s", tc.args, opsExitUsage, tc.want, r)
		}
	}

	r = runOps(runPurge, "--dsn", dsn, "--status", "cancelled", "--older-than", "0", "--force", "--dry-run")
	mustExit(t, r, opsExitOK)
	if !strings.Contains(r.stdout, "2") {
		t.Errorf("purge --status cancelled --dry-run: %s", r)
	}
	r = runOps(runPurge, "--dsn", dsn, "--status", "cancelled", "--id", fmt.Sprint(a1))
	mustExit(t, r, opsExitOK)
	r = runOps(runPurge, "--dsn", dsn, "--status", "cancelled", "--older-than", "0", "--force")
	mustExit(t, r, opsExitOK)
	if n := f.countByStatus("CANCELLED"); n != 0 {
		t.Errorf("%d CANCELLED rows after purge, want 0: %s", n, r)
	}
	if n := f.countByStatus("PENDING"); n != 1 {
		t.Errorf("%d PENDING rows after the purge of cancelled ones, want 1", n)
	}
}

// retry --pending makes a backed-off message due now, attempts unchanged, and refuses the
// FAILED selectors.
func TestRetryPendingCommand(t *testing.T) {
	t.Parallel()
	db := testdb.Migrated(t)
	f := fixtures{t: t, db: db}
	later := f.enqueue("a", outbox.Delay(time.Hour))
	db.MustExec(t, "UPDATE outbox_messages SET attempts = 3 WHERE id = ?", later)
	dsn := db.DSN

	r := runOps(runRetry, "--pending", "--dsn", dsn, "--event-type", "a", "--dry-run")
	mustExit(t, r, opsExitOK)
	if !strings.Contains(r.stdout, "would make 1 waiting PENDING message(s) due now") {
		t.Errorf("dry run: %s", r)
	}
	r = runOps(runRetry, "--pending", "--dsn", dsn, "--id", fmt.Sprint(later))
	mustExit(t, r, opsExitOK)
	if !strings.Contains(r.stdout, "made 1 waiting PENDING message(s) due now") {
		t.Errorf("retry --pending: %s", r)
	}
	var due, attempts int
	if err := db.QueryRow("SELECT next_attempt_at <= UTC_TIMESTAMP(6), attempts FROM outbox_messages WHERE id = ?", later).Scan(&due, &attempts); err != nil {
		t.Fatal(err)
	}
	if due != 1 || attempts != 3 {
		t.Errorf("after retry --pending: due %d, attempts %d; want due now and attempts 3", due, attempts)
	}
	for _, args := range [][]string{{"--pending", "--all", "--dsn", dsn}, {"--pending", "--failed-since", "1h", "--dsn", dsn}} {
		r := runOps(runRetry, args...)
		if r.code != opsExitUsage || !strings.Contains(r.stderr, "--pending takes --id and --event-type only") {
			t.Errorf("%v: %s", args, r)
		}
	}
}

// status shows cancelled counts and the pauses in force, their reasons printed inert.
func TestStatusShowsPausesAndCancelled(t *testing.T) {
	t.Parallel()
	db := testdb.Migrated(t)
	ctx := context.Background()
	f := fixtures{t: t, db: db}
	id := f.enqueue("a")
	if _, err := outbox.Cancel(ctx, db, outbox.Filter{IDs: []outbox.MessageID{id}}); err != nil {
		t.Fatal(err)
	}
	if err := outbox.Pause(ctx, db, "mail", outbox.PauseOptions{For: time.Hour, Reason: "down\x1b[2J"}); err != nil {
		t.Fatal(err)
	}
	r := runOps(runStatus, "--dsn", db.DSN)
	mustExit(t, r, opsExitOK)
	if !strings.Contains(r.stdout, "cancelled:       1") || !strings.Contains(r.stdout, "paused event types") ||
		!strings.Contains(r.stdout, "mail") || strings.Contains(r.stdout, "\x1b") {
		t.Errorf("status: %s", r)
	}
	r = runOps(runStatus, "--dsn", db.DSN, "--json")
	mustExit(t, r, opsExitOK)
	if !strings.Contains(r.stdout, `"cancelled": 1`) || !strings.Contains(r.stdout, `"event_type": "mail"`) {
		t.Errorf("status --json: %s", r)
	}
}
