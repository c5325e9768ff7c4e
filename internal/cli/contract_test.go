package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/outboxgen/outboxgen/gen"
)

// TestAsyncAPICommand: the document goes to stdout, or with -o to a file that is rewritten
// only when it changed and never when outboxgen did not write it; an invalid catalog gets
// check's errors and exit 1, a missing one exit 2.
func TestAsyncAPICommand(t *testing.T) {
	writeCatalog(t, goodCatalog)
	want, err := gen.AsyncAPI("events.yaml", []byte(goodCatalog), gen.DefaultAddressPrefix)
	if err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := run("asyncapi"); code != 0 || errOut != "" || out != string(want) {
		t.Fatalf("asyncapi: exit %d, stderr %q, stdout differs from gen.AsyncAPI: %v", code, errOut, out != string(want))
	}
	if !strings.HasPrefix(string(want), gen.AsyncAPIHeader+"\n") || !strings.Contains(string(want), "\nasyncapi: \"3.0.0\"\n") {
		t.Fatalf("the document lacks its header or version:\n%s", want)
	}
	if code, out, errOut := run("asyncapi", "-f", "events.yaml", "-o", "docs/asyncapi.yaml"); code != 0 || out != "" || errOut != "" {
		t.Fatalf("asyncapi -o: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if have, _ := os.ReadFile("docs/asyncapi.yaml"); string(have) != string(want) {
		t.Fatalf("asyncapi -o wrote:\n%s", have)
	}
	// A stale document of ours is replaced; a file someone wrote is not.
	if err := os.WriteFile("docs/asyncapi.yaml", []byte(gen.AsyncAPIHeader+"\nasyncapi: \"3.0.0\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := run("asyncapi", "-o", "docs/asyncapi.yaml"); code != 0 {
		t.Fatalf("asyncapi -o over its own stale document: exit %d, stderr %q", code, errOut)
	}
	if have, _ := os.ReadFile("docs/asyncapi.yaml"); string(have) != string(want) {
		t.Fatal("asyncapi -o did not replace its own stale document")
	}
	mine := "asyncapi: 3.0.0\ninfo: {title: mine, version: '1'}\n"
	if err := os.WriteFile("mine.yaml", []byte(mine), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := run("asyncapi", "-o", "mine.yaml"); code != 1 || !strings.Contains(errOut, "mine.yaml is not a document outboxgen wrote") {
		t.Errorf("asyncapi -o over a hand-written file: exit %d, stderr %q; want 1 and the reason", code, errOut)
	}
	if have, _ := os.ReadFile("mine.yaml"); string(have) != mine {
		t.Fatal("asyncapi -o overwrote a hand-written file")
	}

	if err := os.WriteFile("bad.yaml", []byte(badCatalog), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, checkErr := run("check", "-f", "bad.yaml")
	if code, out, errOut := run("asyncapi", "-f", "bad.yaml"); code != 1 || out != "" || errOut != checkErr || errOut == "" {
		t.Errorf("asyncapi of an invalid catalog: exit %d, stdout %q, stderr %q; want 1 and check's errors %q", code, out, errOut, checkErr)
	}
	if code, _, errOut := run("asyncapi", "-f", "missing.yaml"); code != 2 || !strings.Contains(errOut, "no catalog at") {
		t.Errorf("asyncapi -f missing.yaml: exit %d, stderr %q; want 2", code, errOut)
	}
	if code, out, errOut := run("asyncapi", "--address-prefix", ""); code != 0 || errOut != "" || !strings.Contains(out, "\n    address: welcome_email\n") {
		t.Errorf("asyncapi --address-prefix '': exit %d, stderr %q; want the bare event type as the address:\n%s", code, errOut, out)
	}
	if code, out, _ := run("asyncapi", "--address-prefix", "prod.events."); code != 0 || !strings.Contains(out, "\n    address: prod.events.welcome_email\n") {
		t.Errorf("asyncapi --address-prefix prod.events.: exit %d; want that prefix in the address:\n%s", code, out)
	}
	if code, _, errOut := run("asyncapi", "--address-prefix", "a b"); code != 2 || !strings.Contains(errOut, "--address-prefix") {
		t.Errorf("asyncapi --address-prefix 'a b': exit %d, stderr %q; want 2", code, errOut)
	}
	if code, out, _ := run("asyncapi", "-h"); code != 0 || !strings.Contains(out, "usage: outboxgen asyncapi") {
		t.Errorf("asyncapi -h: exit %d, stdout %q", code, out)
	}
}

const oldCatalog = `version: 1
package: events
events:
  welcome_email:
    fields: {company_id: int64, email: string, plan: {type: string, optional: true}}
    idempotency_key: [company_id]
  invoice_sent:
    fields: {invoice_id: string}
`

// TestBreakingCommand: breaking changes are printed at their place in -f's catalog, exit 1;
// nothing breaking is one line, exit 0; usage problems exit 2; invalid catalogs exit 1 with
// their errors.
func TestBreakingCommand(t *testing.T) {
	writeCatalog(t, strings.Replace(oldCatalog, "company_id: int64", "company_id: string", 1)+"  trial_ended:\n    fields: {company_id: int64}\n")
	if err := os.WriteFile("old.yaml", []byte(oldCatalog), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run("breaking", "--against", "old.yaml")
	want := `events.yaml:5:26: event "welcome_email": field "company_id": type changed from int64 to string (line 5 of old.yaml): stored values may not decode as string [change: event welcome_email field company_id type changed]` + "\n"
	if code != 1 || out != want || !strings.Contains(errOut, "  - change: \"event welcome_email field company_id type changed\"\n") {
		t.Errorf("breaking: exit %d, stdout %q, stderr %q; want 1 and %q", code, out, errOut, want)
	}
	code, out, errOut = run("breaking", "-f", "old.yaml", "--against", "old.yaml")
	if want := "old.yaml: no breaking change against old.yaml (2 outbox events compared, 0 new)\n"; code != 0 || out != want || errOut != "" {
		t.Errorf("breaking against itself: exit %d, stdout %q, stderr %q; want 0 and %q", code, out, errOut, want)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"breaking"}, "--against is required"},
		{[]string{"breaking", "--against", "gone.yaml"}, "outboxgen breaking: no catalog at " + filepath.Join(mustGetwd(t), "gone.yaml") + " (--against names it"},
		{[]string{"breaking", "-f", "gone.yaml", "--against", "old.yaml"}, "no catalog at"},
		{[]string{"breaking", "--against", "."}, "is a directory"},
		{[]string{"breaking", "--against", "-x:events.yaml"}, "want a file, or REV:PATH"},
		{[]string{"breaking", "--bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"breaking", "--against", "old.yaml", "events.yaml"}, "name the catalog with -f"},
	} {
		if code, _, errOut := run(tc.args...); code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
	if err := os.WriteFile("bad.yaml", []byte(badCatalog), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, checkErr := run("check", "-f", "bad.yaml")
	if code, out, errOut := run("breaking", "-f", "bad.yaml", "--against", "old.yaml"); code != 1 || out != "" || errOut != checkErr {
		t.Errorf("breaking of an invalid catalog: exit %d, stdout %q, stderr %q; want 1 and check's errors", code, out, errOut)
	}
	code, out, errOut = run("breaking", "--against", "bad.yaml")
	if code != 1 || out != "" || !strings.HasPrefix(errOut, "bad.yaml:6:") || !strings.HasSuffix(errOut, "outboxgen breaking: the version to compare with (bad.yaml) is not a valid catalog\n") {
		t.Errorf("breaking against an invalid catalog: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if code, out, _ := run("breaking", "-h"); code != 0 || !strings.Contains(out, "--against origin/main:path/events.yaml") {
		t.Errorf("breaking -h: exit %d, stdout %q; want the CI recipe", code, out)
	}
}

// TestBreakingCommandOrdering: an ordering key added to an event with stored rows is
// breaking (its pending messages have none, so old and new are not ordered together).
func TestBreakingCommandOrdering(t *testing.T) {
	writeCatalog(t, oldCatalog+"    ordering_key: [invoice_id]\n    ordering_group: invoices\n")
	if err := os.WriteFile("old.yaml", []byte(oldCatalog), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run("breaking", "--against", "old.yaml")
	want := `events.yaml:9:19: event "invoice_sent": ordering_key [invoice_id] added: the messages pending from before have no ordering key, so a new message of an aggregate can be handled before or beside an older one, and runtime/outboxkafka's record key becomes the ordering key (another partition than the aggregate's older records); drain the event first (outboxgen status shows none pending) [change: event invoice_sent ordering_key added]` + "\n"
	if code != 1 || out != want || !strings.Contains(errOut, "accept_breaking:") {
		t.Errorf("breaking: exit %d, stdout %q, stderr %q; want 1 and %q", code, out, errOut, want)
	}
	// The other way round, the key is removed: reported at the event, naming the old line.
	code, out, _ = run("breaking", "-f", "old.yaml", "--against", "events.yaml")
	if want := `old.yaml:7:3: event "invoice_sent": ordering_key [invoice_id] removed (line 9 of events.yaml)`; code != 1 || !strings.HasPrefix(out, want) {
		t.Errorf("breaking, key removed: exit %d, stdout %q; want 1 and %q...", code, out, want)
	}
}

func mustGetwd(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return wd
}

// TestBreakingAgainstGitRevision runs the CI recipe against a repository made in the test:
// the catalog lives in a subdirectory, outboxgen runs from elsewhere, and --against names a
// revision and a path from the repository's root (origin/main:sub/events.yaml), or one
// relative to the catalog's directory (HEAD:./events.yaml), as git show reads them.
func TestBreakingAgainstGitRevision(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	top := t.TempDir()
	repo := filepath.Join(top, "repo")
	t.Setenv("GIT_CONFIG_GLOBAL", os.DevNull)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main"}, args...)...)
		cmd.Dir = repo
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	if err := os.MkdirAll(filepath.Join(repo, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	catalog := filepath.Join(repo, "sub", "events.yaml")
	if err := os.WriteFile(catalog, []byte(oldCatalog), 0o644); err != nil {
		t.Fatal(err)
	}
	git("init", "-q")
	git("add", "sub/events.yaml")
	git("commit", "-q", "-m", "catalog")
	git("update-ref", "refs/remotes/origin/main", "HEAD") // what a CI checkout's fetch leaves
	// The working copy removes an event and a field: two breaking changes.
	changed := strings.Replace(oldCatalog, "  invoice_sent:\n    fields: {invoice_id: string}\n", "", 1)
	changed = strings.Replace(changed, ", plan: {type: string, optional: true}", "", 1)
	if err := os.WriteFile(catalog, []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(top)
	f := filepath.Join("repo", "sub", "events.yaml")
	for _, against := range []string{"origin/main:sub/events.yaml", "HEAD:./events.yaml"} {
		code, out, errOut := run("breaking", "-f", f, "--against", against)
		want := f + `:3:1: event "invoice_sent" removed (line 7 of ` + against + `): its pending rows are never claimed again (they stay PENDING), and its consumers stop receiving it; drain it first (outboxgen status shows none pending), or keep it [change: event invoice_sent removed]` + "\n" +
			f + `:4:3: event "welcome_email": field "plan" removed (line 5 of ` + against + `): consumers that read it get nothing from new rows [change: event welcome_email field plan removed]` + "\n"
		if code != 1 || out != want || !strings.HasPrefix(errOut, "outboxgen breaking: 2 breaking changes against "+against+".") {
			t.Errorf("breaking --against %s: exit %d, stderr %q, stdout:\n%s\nwant 1 and:\n%s", against, code, errOut, out, want)
		}
	}
	// Committed, the change is the new baseline: nothing breaks against it.
	git("commit", "-q", "-a", "-m", "drop invoice_sent")
	if code, out, errOut := run("breaking", "-f", f, "--against", "HEAD:sub/events.yaml"); code != 0 || out != f+": no breaking change against HEAD:sub/events.yaml (1 outbox event compared, 0 new)\n" {
		t.Errorf("breaking against HEAD after the commit: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	for _, against := range []string{"nosuchrev:sub/events.yaml", "HEAD:sub/missing.yaml"} {
		code, _, errOut := run("breaking", "-f", f, "--against", against)
		if code != 2 || !strings.HasPrefix(errOut, "outboxgen breaking: git show "+against+" (in "+filepath.Dir(f)+"): fatal: ") {
			t.Errorf("breaking --against %s: exit %d, stderr %q; want 2 and git's reason", against, code, errOut)
		}
	}
}
