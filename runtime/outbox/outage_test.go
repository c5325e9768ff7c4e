package outbox

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"
)

// An outage is logged when it starts, again once per outageRepeat while it lasts ("still
// failing", with how long and how many failures), and when it ends; failures in between log
// nothing.
func TestOutageLogsStillFailingOncePerRepeat(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	logs := &logRecords{}
	log := slog.New(logs)
	o := &outage{what: "claim"}
	err := errors.New("connection refused")

	o.fail(ctx, log, err)
	if n := len(logs.all); n != 1 || logs.count("outbox claim failed") != 1 {
		t.Fatalf("after the first failure: %d records %v, want one \"outbox claim failed\"", n, logs.errorLines())
	}
	o.fail(ctx, log, err)
	if n := len(logs.all); n != 1 {
		t.Fatalf("a second failure within %v logged %v, want nothing more", outageRepeat, logs.errorLines())
	}

	// The outage started, and was last logged, a little over outageRepeat ago.
	back := outageRepeat + time.Second
	o.since, o.logged = o.since.Add(-back), o.logged.Add(-back)
	o.fail(ctx, log, err)
	if n := logs.count("outbox claim still failing"); n != 1 {
		t.Fatalf("after %v of failures: %d \"still failing\" records (all: %v), want 1", back, n, logs.errorLines())
	}
	if n := len(logs.all); n != 2 {
		t.Fatalf("after %v of failures: records %v, want \"failed\" then \"still failing\"", back, logs.errorLines())
	}
	rec := logs.all[1]
	if rec.Level != slog.LevelError {
		t.Errorf("\"still failing\" logged at %v, want ERROR", rec.Level)
	}
	attrs, _ := logs.find("outbox claim still failing")
	want := map[string]string{"failing_for": back.String(), "failures": "3", "error": "connection refused"}
	for k, v := range want {
		if attrs[k] != v {
			t.Errorf("\"still failing\" attribute %s = %q, want %q (all: %v)", k, attrs[k], v, attrs)
		}
	}

	// The next minute starts from this line: another failure right away logs nothing.
	o.fail(ctx, log, err)
	if n := len(logs.all); n != 2 {
		t.Fatalf("a failure right after \"still failing\" logged %v, want nothing more", logs.errorLines())
	}

	o.ok(ctx, log)
	attrs, ok := logs.find("outbox claim recovered")
	if !ok || len(logs.all) != 3 {
		t.Fatalf("after recovery: %d records, want a third, \"outbox claim recovered\"", len(logs.all))
	}
	if attrs["failures"] != "4" {
		t.Errorf("\"recovered\" failures = %q, want 4", attrs["failures"])
	}
}
