package cli

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/outboxgen/outboxgen/internal/testdb"
	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// The operator commands against the real server (OUTBOX_TEST_DSN; skipped without it). Each
// test has its own database (testdb), built with outbox.Enqueue and SQL fixtures for the
// states a test cannot wait for (stuck leases, old failures).

type opsFunc func(args []string, stdout, stderr io.Writer) int

type opsResult struct {
	code           int
	stdout, stderr string
}

func runOps(fn opsFunc, args ...string) opsResult {
	var out, errb bytes.Buffer
	code := fn(args, &out, &errb)
	return opsResult{code: code, stdout: out.String(), stderr: errb.String()}
}

func (r opsResult) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

func mustExit(t *testing.T, r opsResult, want int) {
	t.Helper()
	if r.code != want {
		t.Fatalf("want exit %d, got %s", want, r)
	}
}

// fixtures writes rows directly: the times are offsets in seconds from the database clock
// (negative = in the past), NULL when nil.
type fixtures struct {
	t  *testing.T
	db *testdb.DB
}

func secs(n int) *int { return &n }

func (f fixtures) insert(eventType, status string, attempts int, created, claimed, reclaimAfter, sent, failed *int, lastError string) outbox.MessageID {
	f.t.Helper()
	ts := func(off *int) string {
		if off == nil {
			return "NULL"
		}
		return fmt.Sprintf("TIMESTAMPADD(SECOND, %d, UTC_TIMESTAMP(6))", *off)
	}
	if created == nil {
		created = secs(0)
	}
	var token, lastErr any
	if claimed != nil {
		token = "fixture"
	}
	if lastError != "" {
		lastErr = lastError
	}
	res := f.db.MustExec(f.t, `INSERT INTO outbox_messages
		(event_type, payload, status, attempts, max_attempts, next_attempt_at, claimed_at, reclaim_after,
		 claim_token, last_error, created_at, sent_at, failed_at)
		VALUES (?, '{}', ?, ?, 10, `+ts(created)+`, `+ts(claimed)+`, `+ts(reclaimAfter)+`, ?, ?, `+
		ts(created)+`, `+ts(sent)+`, `+ts(failed)+`)`, eventType, status, attempts, token, lastErr)
	id, err := res.LastInsertId()
	if err != nil {
		f.t.Fatal(err)
	}
	return outbox.MessageID(id)
}

// processing adds a claimed row: claimed ago seconds back with a lease of lease seconds.
func (f fixtures) processing(eventType string, ago, lease int) outbox.MessageID {
	f.t.Helper()
	return f.insert(eventType, "PROCESSING", 1, secs(-ago-1), secs(-ago), secs(-ago+lease), nil, nil, "")
}

func (f fixtures) failed(eventType string, ago int, lastError string) outbox.MessageID {
	f.t.Helper()
	return f.insert(eventType, "FAILED", 10, secs(-ago-60), nil, nil, nil, secs(-ago), lastError)
}

func (f fixtures) sent(eventType string, ago int) outbox.MessageID {
	f.t.Helper()
	return f.insert(eventType, "SENT", 1, secs(-ago-60), nil, nil, secs(-ago), nil, "")
}

func (f fixtures) enqueue(eventType string, opts ...outbox.EnqueueOption) outbox.MessageID {
	f.t.Helper()
	id, err := outbox.Enqueue(context.Background(), f.db, outbox.Message{EventType: eventType, Payload: json.RawMessage(`{"n":1}`)}, append(opts, outbox.Standalone())...)
	if err != nil {
		f.t.Fatalf("enqueue %s: %v", eventType, err)
	}
	return id
}

// dueSince enqueues a message that has been due, unclaimed, for ago seconds.
func (f fixtures) dueSince(eventType string, ago int) outbox.MessageID {
	f.t.Helper()
	id := f.enqueue(eventType)
	f.db.MustExec(f.t, "UPDATE outbox_messages SET created_at = TIMESTAMPADD(SECOND, ?, UTC_TIMESTAMP(6)), next_attempt_at = TIMESTAMPADD(SECOND, ?, UTC_TIMESTAMP(6)) WHERE id = ?", -ago, -ago, id)
	return id
}

func (f fixtures) status(id outbox.MessageID) (status string, attempts int, failedAt sql.NullTime) {
	f.t.Helper()
	if err := f.db.QueryRow("SELECT status, attempts, failed_at FROM outbox_messages WHERE id = ?", id).
		Scan(&status, &attempts, &failedAt); err != nil {
		f.t.Fatalf("row %d: %v", id, err)
	}
	return
}

func (f fixtures) countByStatus(status string) int {
	f.t.Helper()
	var n int
	if err := f.db.QueryRow("SELECT COUNT(*) FROM outbox_messages WHERE status = ?", status).Scan(&n); err != nil {
		f.t.Fatal(err)
	}
	return n
}

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
		{runPurge, []string{"--dsn", dsn, "--older-than", "7d", "--status", "pending"}, "--status must be sent or failed"},
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

// silentServer accepts TCP connections and never answers: a host that is up while its MySQL
// is wedged. Without a bound on the handshake a command would hang on it.
func silentServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// TestUnreachableExit3 needs no MariaDB: nothing listens on port 1, and a silent listener
// stands in for a wedged server.
func TestUnreachableExit3(t *testing.T) {
	t.Parallel()
	silent := silentServer(t)
	for _, target := range []struct{ dsn, shown, cause string }{
		{"u:pw@tcp(127.0.0.1:1)/x?timeout=2s", "u@tcp(127.0.0.1:1)/x", "connection refused"},
		{"u:pw@tcp(" + silent + ")/x?timeout=300ms", "u@tcp(" + silent + ")/x", "no answer within 300ms"},
	} {
		testUnreachable(t, target.dsn, target.shown, target.cause)
	}
}

func testUnreachable(t *testing.T, dsn, shown, cause string) {
	for name, c := range map[string]struct {
		fn   opsFunc
		args []string
	}{
		"status":  {runStatus, []string{"--dsn", dsn, "--check"}},
		"retry":   {runRetry, []string{"--dsn", dsn, "--id", "1"}},
		"purge":   {runPurge, []string{"--dsn", dsn, "--older-than", "7d"}},
		"migrate": {runMigrate, []string{"--dsn", dsn}},
	} {
		r := runOps(c.fn, c.args...)
		if r.code != opsExitDB {
			t.Errorf("%s: want exit 3, got %s", name, r)
		}
		lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
		if len(lines) != 1 || !strings.HasPrefix(lines[0], "outboxgen "+name+": cannot connect (database "+shown+"): ") ||
			!strings.Contains(lines[0], cause) {
			t.Errorf("%s on %s: want one line naming the database and %q, got %q", name, shown, cause, r.stderr)
		}
		if r.stdout != "" {
			t.Errorf("%s: stdout not empty: %q", name, r.stdout)
		}
	}
}

// The DSN's password never appears in anything a command prints: on an unreachable server, on
// a wrong password against the real server, on bad flags and on a malformed DSN, through --dsn
// and through OUTBOX_DSN.
func TestNoCommandPrintsThePassword(t *testing.T) {
	const pw = "Zebra-Owl-4471-secret"
	db := testdb.Migrated(t)
	cfg, err := mysql.ParseDSN(db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Passwd = pw // wrong password against the real server
	wrongPw := cfg.FormatDSN()

	dsns := map[string]string{
		"refused":        "app:" + pw + "@tcp(127.0.0.1:1)/shop",
		"silent server":  "app:" + pw + "@tcp(" + silentServer(t) + ")/shop?timeout=200ms",
		"wrong password": wrongPw,
		"malformed":      "app:" + pw + "@tcp(127.0.0.1:1)/shop?parseTime=maybe",
		"escaped param":  "app:" + pw + "@tcp(127.0.0.1:1)/shop?loc=Nowhere%2FCity",
	}
	commands := map[string]struct {
		fn   opsFunc
		args []string
	}{
		"status":      {runStatus, []string{"--check", "--json"}},
		"status text": {runStatus, nil},
		"retry":       {runRetry, []string{"--id", "1", "--dry-run"}},
		"purge":       {runPurge, []string{"--older-than", "7d"}},
		"migrate":     {runMigrate, nil},
		"bad flag":    {runStatus, []string{"--window", "x" + pw}},
		"positional":  {runRetry, []string{"--id", "1", "app:" + pw + "@tcp(h)/x"}},
	}
	for dname, dsn := range dsns {
		for cname, c := range commands {
			for _, viaEnv := range []bool{false, true} {
				args := c.args
				if viaEnv {
					t.Setenv(envDSN, dsn)
				} else {
					t.Setenv(envDSN, "")
					args = append([]string{"--dsn", dsn}, args...)
				}
				r := runOps(c.fn, args...)
				if strings.Contains(r.stdout+r.stderr, pw) || strings.Contains(r.stdout+r.stderr, "Zebra") {
					t.Errorf("%s / %s (env=%v) printed the password:\n%s", dname, cname, viaEnv, r)
				}
				if r.code == opsExitOK || r.code == opsExitCheck {
					t.Errorf("%s / %s (env=%v): want a failure exit, got %s", dname, cname, viaEnv, r)
				}
				if r.stderr == "" {
					t.Errorf("%s / %s (env=%v): failed silently: %s", dname, cname, viaEnv, r)
				}
			}
		}
	}
	// The wrong password is rejected by the server with exit 3, not mistaken for usage.
	t.Setenv(envDSN, "")
	r := runOps(runStatus, "--dsn", wrongPw)
	if r.code != opsExitDB || !strings.Contains(r.stderr, "Access denied") {
		t.Errorf("wrong password: want exit 3 with the server's 'Access denied', got %s", r)
	}
}

// TestDSNFromEnvironment: OUTBOX_DSN is used when --dsn is absent, and parseTime/loc are added
// to a DSN that lacks them (the runtime refuses to run without).
func TestDSNFromEnvironment(t *testing.T) {
	db := testdb.Migrated(t)
	cfg, err := mysql.ParseDSN(db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	bare := fmt.Sprintf("%s:%s@%s(%s)/%s", cfg.User, cfg.Passwd, cfg.Net, cfg.Addr, cfg.DBName)
	t.Setenv(envDSN, bare)
	f := fixtures{t: t, db: db}
	f.enqueue("a")
	r := runOps(runStatus, "--json")
	mustExit(t, r, opsExitOK)
	var rep statusReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || rep.Pending != 1 {
		t.Errorf("status via %s without parseTime: pending=%d err=%v\n%s", envDSN, rep.Pending, err, r)
	}
	// --dsn wins over the environment.
	t.Setenv(envDSN, "u:pw@tcp(127.0.0.1:1)/x")
	r = runOps(runStatus, "--dsn", bare, "--check")
	mustExit(t, r, opsExitOK)
}

// With the right password, the commands succeed and still never print it, even when a
// handler's error stored in last_error (or an event type) happens to contain it. A user with a
// distinctive password is created for the test, since the server's own may be an ordinary word.
func TestPasswordScrubbedFromTableData(t *testing.T) {
	t.Parallel()
	const pw = "Quokka-Lantern-8812-secret"
	db := testdb.Migrated(t)
	dsn := db.User(t, pw, "ALL")

	f := fixtures{t: t, db: db}
	id := f.failed("billing."+pw, 60, "connect app:"+pw+"@tcp(db:3306)/x: refused")
	for _, c := range []struct {
		fn     opsFunc
		args   []string
		masked bool // prints the row, so the password's place shows *****
	}{
		{runStatus, []string{"--json"}, true},
		{runStatus, nil, true},
		{runRetry, []string{"--id", fmt.Sprint(id), "--dry-run"}, true},
		{runRetry, []string{"--event-type", "billing." + pw, "--dry-run"}, true},
		{runMigrate, nil, false},
		{runPurge, []string{"--older-than", "7d"}, false},
	} {
		r := runOps(c.fn, append([]string{"--dsn", dsn}, c.args...)...)
		mustExit(t, r, opsExitOK)
		if strings.Contains(r.stdout+r.stderr, pw) || strings.Contains(r.stdout+r.stderr, "Quokka") {
			t.Errorf("%v printed the password:\n%s", c.args, r)
		}
		if c.masked && !strings.Contains(r.stdout, "*****") {
			t.Errorf("%v: want the password's place marked *****:\n%s", c.args, r)
		}
	}
}

// A password that is an ordinary word must not mangle the commands' own text: only what comes
// from outside is cleaned.
func TestOrdinaryWordPasswordKeepsFixedText(t *testing.T) {
	t.Parallel()
	dsn := "outbox:outbox@tcp(127.0.0.1:1)/x"
	r := runOps(runStatus, "--dsn", dsn, "-h")
	if r.code != opsExitOK || !strings.Contains(r.stdout, "usage: outboxgen status") || !strings.Contains(r.stdout, "outbox.Stats") {
		t.Errorf("-h with password 'outbox': %s", r)
	}
	r = runOps(runStatus, "--dsn", dsn, "--window", "outbox")
	if r.code != opsExitUsage || !strings.Contains(r.stderr, `invalid value "*****" for flag -window`) || !strings.Contains(r.stderr, "see outboxgen status -h") {
		t.Errorf("bad flag with password 'outbox': %s", r)
	}
	r = runOps(runMigrate, "--dsn", dsn)
	// The user name equals the password here, so it is masked too; the fixed text is not.
	if r.code != opsExitDB || !strings.HasPrefix(r.stderr, "outboxgen migrate: cannot connect (database *****@tcp(127.0.0.1:1)/x): ") {
		t.Errorf("unreachable with password 'outbox': %s", r)
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
