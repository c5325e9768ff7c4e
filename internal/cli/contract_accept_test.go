package cli

import (
	"os"
	"strings"
	"testing"
)

// TestBreakingCommandAccept: a change accepted in the catalog is printed as accepted and the
// run passes; the other changes still fail with their ids; an entry that matches nothing
// fails at its line; --accept accepts for one run, and a stale one fails.
func TestBreakingCommandAccept(t *testing.T) {
	changed := strings.Replace(oldCatalog, ", plan: {type: string, optional: true}", "", 1)
	const entry = "accept_breaking:\n  - change: event welcome_email field plan removed\n    reason: \"plan moved to billing\\x1b[31m\"\n"
	writeCatalog(t, changed+entry)
	if err := os.WriteFile("old.yaml", []byte(oldCatalog), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run("breaking", "--against", "old.yaml")
	want := `events.yaml:4:3: accepted (accept_breaking at line 10: "plan moved to billing\x1b[31m"): event "welcome_email": field "plan" removed (line 5 of old.yaml): consumers that read it get nothing from new rows` + "\n" +
		"events.yaml: no breaking change against old.yaml beyond the 1 accepted (2 outbox events compared, 0 new)\n"
	if code != 0 || out != want || errOut != "" {
		t.Errorf("an accepted change: exit %d, stderr %q, stdout:\n%s\nwant 0 and:\n%s", code, errOut, out, want)
	}

	// Another change beside it still fails, with the id that would accept it.
	writeCatalog(t, strings.Replace(changed, "invoice_id: string", "invoice_id: int64", 1)+entry)
	if err := os.WriteFile("old.yaml", []byte(oldCatalog), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = run("breaking", "--against", "old.yaml")
	wantLine := `events.yaml:8:26: event "invoice_sent": field "invoice_id": type changed from string to int64 (line 8 of old.yaml): stored values may not decode as int64 [change: event invoice_sent field invoice_id type changed]` + "\n"
	if code != 1 || !strings.HasPrefix(out, `events.yaml:4:3: accepted (`) || !strings.HasSuffix(out, wantLine) ||
		!strings.Contains(errOut, "1 breaking change against old.yaml") || !strings.Contains(errOut, "\naccept_breaking:\n  - change: \"event invoice_sent field invoice_id type changed\"\n    reason: ") {
		t.Errorf("an accepted and an unaccepted change: exit %d, stdout:\n%s\nstderr:\n%s\nwant 1, the accepted line, then:\n%s", code, out, errOut, wantLine)
	}
	// Accepted for this run by its id.
	if code, out, _ := run("breaking", "--against", "old.yaml", "--accept", "event invoice_sent field invoice_id type changed"); code != 0 ||
		!strings.Contains(out, `events.yaml:8:26: accepted (--accept): event "invoice_sent"`) || !strings.HasSuffix(out, "beyond the 2 accepted (2 outbox events compared, 0 new)\n") {
		t.Errorf("--accept: exit %d, stdout:\n%s\nwant 0 with both accepted", code, out)
	}
	if code, out, _ := run("breaking", "--against", "old.yaml", "--accept", "event invoice_sent field invoice_id type changed", "--accept", "event invoice_sent removed"); code != 1 ||
		!strings.HasSuffix(out, "outboxgen breaking: --accept \"event invoice_sent removed\" matches no breaking change against old.yaml: remove it, or correct the id\n") {
		t.Errorf("a stale --accept: exit %d, stdout:\n%s\nwant 1, naming it", code, out)
	}

	// An entry that matches nothing fails at its place.
	writeCatalog(t, oldCatalog+entry)
	if err := os.WriteFile("old.yaml", []byte(oldCatalog), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ = run("breaking", "--against", "old.yaml")
	if want := `events.yaml:10:13: accept_breaking: change "event welcome_email field plan removed" matches no breaking change against old.yaml: remove it, or correct the id` + "\n"; code != 1 || out != want {
		t.Errorf("a stale entry: exit %d, stdout %q; want 1 and %q", code, out, want)
	}
	// Once merged, the version compared against holds it too: ignored.
	if err := os.WriteFile("old.yaml", []byte(oldCatalog+entry), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, _ := run("breaking", "--against", "old.yaml"); code != 0 || out != "events.yaml: no breaking change against old.yaml (2 outbox events compared, 0 new)\n" {
		t.Errorf("an entry both versions hold: exit %d, stdout %q; want 0", code, out)
	}
}
