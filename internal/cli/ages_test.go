package cli

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/internal/testdb"
)

// A duration past a Duration's range wrapped to a negative one, and FormatAge recursed on it
// until the stack overflowed (1 GB, exit 2, which a cron probe reads as a usage error). Every
// duration flag now refuses anything over a century, naming the flag.
func TestDurationFlagsRefuseOverflow(t *testing.T) {
	t.Parallel()
	for _, in := range []string{"106751.99116730064d", "106752d", "36501d", "2562048h", "9999999999h", "-106751.99116730064d"} {
		if d, err := parseDurationDays(in); err == nil {
			t.Errorf("parseDurationDays(%q) = %v, nil; want an error", in, d)
		}
	}
	if d, err := parseDurationDays("36500d"); err != nil || d != maxDuration {
		t.Errorf("parseDurationDays(36500d) = %v, %v; want %v", d, err, maxDuration)
	}
	const dsn = "u:pw@tcp(127.0.0.1:1)/x"
	for _, tc := range []struct {
		fn   opsFunc
		flag string
	}{
		{runStatus, "window"}, {runStatus, "max-due-age"}, {runStatus, "max-held-age"},
		{runPurge, "older-than"}, {runRetry, "failed-since"},
	} {
		r := runOps(tc.fn, "--dsn", dsn, "--"+tc.flag, "106751.99116730064d")
		mustExit(t, r, opsExitUsage)
		if !strings.Contains(r.stderr, "for flag -"+tc.flag+": ") || !strings.Contains(r.stderr, "at most 36500d") {
			t.Errorf("--%s 106751.99116730064d: want an error naming the flag and the bound:\n%s", tc.flag, r)
		}
	}
}

// FormatAge takes every Duration, the two ends of the range included, without recursing.
func TestFormatAgeExtremes(t *testing.T) {
	t.Parallel()
	for in, want := range map[time.Duration]string{
		math.MaxInt64:            ">106751d23h47m17s",
		math.MinInt64:            "<-106751d23h47m17s",
		math.MinInt64 + 1:        "-106751d23h47m17s",
		math.MaxInt64 - 1:        "106751d23h47m17s",
		-1500 * time.Millisecond: "-2s",
		-499 * time.Millisecond:  "0s",
		maxDuration:              "36500d",
	} {
		if got := formatAge(in); got != want {
			t.Errorf("formatAge(%d) = %q, want %q", int64(in), got, want)
		}
	}
}

// A row due since year 1000 is over a thousand years old: more than a Duration holds. Its age
// wrapped to a negative one, and status --check passed it. Ages saturate instead.
func TestStatusAncientRowFailsCheck(t *testing.T) {
	t.Parallel()
	db := testdb.Migrated(t)
	f := fixtures{t: t, db: db}
	id := f.enqueue("ancient")
	db.MustExec(t, "UPDATE outbox_messages SET created_at = '1000-01-01 00:00:00', next_attempt_at = '1000-01-01 00:00:00' WHERE id = ?", id)
	r := runOps(runStatus, "--dsn", db.DSN, "--check")
	mustExit(t, r, opsExitCheck)
	if !strings.Contains(r.stdout, "oldest due:      >106751d") || !strings.Contains(r.stdout, "check: FAILING: due messages have waited more than 10m") {
		t.Errorf("status --check on a row due since year 1000:\n%s", r)
	}
	r = runOps(runStatus, "--dsn", db.DSN, "--json")
	mustExit(t, r, opsExitOK)
	var rep statusReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.OldestDueSeconds < 9e9 || rep.OldestPendingSeconds < 9e9 || rep.ByType["ancient"].OldestDueSeconds < 9e9 || rep.Check.OK {
		t.Errorf("status --json: oldest due %v s, oldest pending %v s, check ok %v; want ages past 9e9 s and the check failing",
			rep.OldestDueSeconds, rep.OldestPendingSeconds, rep.Check.OK)
	}
}
