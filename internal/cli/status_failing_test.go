package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/outboxgen/outboxgen/internal/testdb"
)

// A type whose handlers keep failing fails the check while no message is FAILED yet: five of
// its messages wait for retries and none was sent in the last 30s. A type with as many retries
// that still delivers is not failing.
func TestStatusCheckShowsAFailingTypeBeforeItsFirstFailed(t *testing.T) {
	t.Parallel()
	db := testdb.Migrated(t)
	f := fixtures{t: t, db: db}
	for i := 0; i < 5; i++ {
		f.insert("mailer\x1b[2J", "PENDING", 2, secs(-20), nil, nil, nil, nil, "attempt 2 of 10: provider unavailable")
		f.insert("flaky", "PENDING", 1, secs(-20), nil, nil, nil, nil, "attempt 1 of 10: timeout")
	}
	f.sent("mailer\x1b[2J", 120)
	f.sent("flaky", 1)

	r := runOps(runStatus, "--dsn", db.DSN, "--check", "--json")
	mustExit(t, r, opsExitCheck)
	var rep statusReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Failed != 0 {
		t.Fatalf("fixture has %d FAILED, want none", rep.Failed)
	}
	all := strings.Join(rep.Check.Problems, "\n")
	if !strings.Contains(all, "keep failing") || !strings.Contains(all, "mailer") || strings.Contains(all, "flaky") || strings.Contains(all, "\x1b") {
		t.Errorf("problems = %q, want the escaped mailer type alone failing", rep.Check.Problems)
	}
	var mailer typeReport
	for k, v := range rep.ByType {
		if strings.HasPrefix(k, "mailer") {
			mailer = v
		}
	}
	if !mailer.Failing || mailer.Retrying != 5 || rep.ByType["flaky"].Failing || rep.ByType["flaky"].Retrying != 5 {
		t.Errorf("by type: mailer %+v, flaky %+v; want mailer failing, both with 5 retrying", mailer, rep.ByType["flaky"])
	}

	r = runOps(runStatus, "--dsn", db.DSN, "--check")
	mustExit(t, r, opsExitCheck)
	if !strings.Contains(r.stdout, "keep failing") || strings.Contains(r.stdout, "\x1b") {
		t.Errorf("status text does not show the failing type, or shows raw escapes:\n%s", r.stdout)
	}
}
