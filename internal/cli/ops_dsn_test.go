package cli

import (
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/outboxgen/outboxgen/internal/testdb"
)

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
