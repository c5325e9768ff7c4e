package outbox

import (
	"sync"
	"testing"
	"time"
)

// stubClock is a clock a test moves by hand.
type stubClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *stubClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *stubClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func TestSinceReadsTheGivenClock(t *testing.T) {
	c := &stubClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	t0 := c.Now()
	c.advance(90 * time.Second)
	if got := since(c, t0); got != 90*time.Second {
		t.Fatalf("since = %s, want 90s on the stub clock", got)
	}
}
