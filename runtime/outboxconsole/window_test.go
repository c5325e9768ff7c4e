package outboxconsole

import (
	"strings"
	"testing"
	"time"
)

// TestFailedWindowOnDatabaseClock: the overview's "FAILED within the last 1h" counts by the
// database clock that wrote failed_at. With the console's clock 2h ahead of the database, a
// failure of a minute ago still raises the alert; with it 2h behind, a failure of 90 minutes
// ago still does not. Each console counts exactly the one recent failure.
func TestFailedWindowOnDatabaseClock(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.failed("recent_failure", 60, "boom")    // a minute ago, on the database clock
	b.failed("earlier_failure", 90*60, "old") // 90 minutes ago
	for _, skew := range []time.Duration{2 * time.Hour, -2 * time.Hour, 0} {
		clock := &testClock{off: skew}
		c := setupOn(t, b.db, withClock(clock))
		r := c.get("/")
		if !strings.Contains(r.body, "1 message(s) FAILED within the last 1h") {
			t.Errorf("console clock %v off the database's: the overview does not count the one failure of the last hour:\n%s",
				skew, alertLines(r.body))
		}
	}
}

// alertLines are the overview's alert paragraphs, for a failure message.
func alertLines(body string) string {
	var out []string
	for _, line := range strings.Split(body, "\n") {
		if strings.Contains(line, `class="alert`) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
