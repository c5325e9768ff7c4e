package cli

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/outboxgen/outboxgen/internal/testdb"
	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// What a row may hold that a terminal acts on: an OSC that retitles the window (ESC ] ... BEL),
// erase-line and carriage return that overwrite the line, a CSI as a C1 character, conceal
// (ESC [8m) that hides what follows, and in the VARBINARY columns 0xFF (text/tabwriter's escape
// character) among bytes that are not UTF-8.
const (
	nastyType  = "evt\x1b]0;owned\a\xff"
	nastyError = "webhook 500: \x1b[2K\r\u009b31m\x1b[8m"
	nastyKey   = "key\x1b[8m\xfe"
)

// requireInert fails unless out holds nothing a terminal acts on.
func requireInert(t *testing.T, what, out string) {
	t.Helper()
	for _, bad := range []string{"\x1b", "\a", "\r", "\xff", "\xfe", "\u009b"} {
		if strings.Contains(out, bad) {
			t.Errorf("%s prints %q raw:\n%q", what, bad, out)
		}
	}
}

// Every operator command prints text from the database escaped: the check line stays visible,
// the window keeps its title, tabwriter keeps its columns.
func TestDatabaseTextIsInertOnTheTerminal(t *testing.T) {
	t.Parallel()
	db := testdb.Migrated(t)
	f := fixtures{t: t, db: db}
	failed := f.failed(nastyType, 60, nastyError)
	db.MustExec(t, "UPDATE outbox_messages SET payload = ?, idempotency_key = ? WHERE id = ?",
		`{"note":"a\u001b]0;owned\u0007b`+"\u009b"+`"}`, "idem\x1b[8m", failed)
	withHeader := f.enqueue("with_header", outbox.Header("note", "a\x1b[8mhidden"))
	db.HeldKey(t, nastyKey, nastyType, 30)
	id := func(id outbox.MessageID) string { return fmt.Sprint(id) }

	r := runOps(runStatus, "--dsn", db.DSN, "--check")
	mustExit(t, r, opsExitCheck)
	requireInert(t, "status", r.stdout+r.stderr)
	for _, want := range []string{`evt\x1b]0;owned\a\xFF`, `webhook 500: \x1b[2K`, `\u009b31m\x1b[8m`, `key\x1b[8m\xFE`, "\ncheck: FAILING: "} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("status: want %q in\n%s", want, r.stdout)
		}
	}
	r = runOps(runRetry, "--dsn", db.DSN, "--all", "--dry-run")
	mustExit(t, r, opsExitOK)
	requireInert(t, "retry --dry-run", r.stdout+r.stderr)
	if !strings.Contains(r.stdout, `webhook 500: \x1b[2K`) {
		t.Errorf("retry --dry-run without the escaped error:\n%s", r.stdout)
	}
	r = runOps(runRetry, "--dsn", db.DSN, "--event-type", "nope", "--dry-run")
	mustExit(t, r, opsExitOK)
	requireInert(t, "retry naming the types with FAILED messages", r.stdout+r.stderr)
	for _, args := range [][]string{{"--id", id(failed)}, {"--id", id(withHeader)}} {
		r = runOps(runShow, append([]string{"--dsn", db.DSN}, args...)...)
		mustExit(t, r, opsExitOK)
		requireInert(t, "show "+args[1], r.stdout+r.stderr)
	}
	r = runOps(runShow, "--dsn", db.DSN, "--id", id(withHeader))
	if !strings.Contains(r.stdout, `a\x1b[8mhidden`) {
		t.Errorf("show without the escaped header:\n%s", r.stdout)
	}
	for _, cmd := range []struct {
		name string
		fn   opsFunc
		args []string
	}{
		{"status --json", runStatus, nil},
		{"show --json", runShow, []string{"--id", id(failed)}},
	} {
		r = runOps(cmd.fn, append(append([]string{"--dsn", db.DSN, "--json"}, cmd.args...), "--json")...)
		mustExit(t, r, opsExitOK)
		requireInert(t, cmd.name, r.stdout+r.stderr)
		if !json.Valid([]byte(r.stdout)) || !utf8.ValidString(r.stdout) {
			t.Errorf("%s: not valid UTF-8 JSON:\n%s", cmd.name, r.stdout)
		}
	}
}

// status --json writes event types that are not UTF-8 as outboxprom does (\xNN): two types that
// differ only there are two keys, each with its own counts, not one "x\uFFFD" twice.
func TestStatusJSONKeepsNonUTF8TypesApart(t *testing.T) {
	t.Parallel()
	db := testdb.Migrated(t)
	db.Pending(t, "x\xff")
	db.Pending(t, "x\xff")
	db.Pending(t, "x\xfe")
	r := runOps(runStatus, "--dsn", db.DSN, "--json")
	mustExit(t, r, opsExitOK)
	var rep statusReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("status --json: %v\n%s", err, r.stdout)
	}
	if len(rep.ByType) != 2 || rep.ByType[`x\xFF`].Pending != 2 || rep.ByType[`x\xFE`].Pending != 1 {
		t.Errorf("by_type = %+v, want x\\xFF with 2 pending and x\\xFE with 1\n%s", rep.ByType, r.stdout)
	}
	if strings.Count(r.stdout, `"x\\xF`) != 2 || strings.Contains(r.stdout, `\ufffd`) {
		t.Errorf("status --json: want the two escaped keys once each:\n%s", r.stdout)
	}
	r = runOps(runStatus, "--dsn", db.DSN)
	mustExit(t, r, opsExitOK)
	requireInert(t, "status", r.stdout)
	if !strings.Contains(r.stdout, "\n"+`x\xFE  `) || !strings.Contains(r.stdout, "\n"+`x\xFF  `) {
		t.Errorf("status: want rows x\\xFE and x\\xFF:\n%s", r.stdout)
	}
}
