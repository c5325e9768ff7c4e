package outbox

import (
	"sync/atomic"
	"testing"
	"time"
)

// stubClock is a clock a test moves by hand: unix nanoseconds, safe for concurrent use.
type stubClock struct{ ns atomic.Int64 }

func (c *stubClock) Now() time.Time          { return time.Unix(0, c.ns.Load()).UTC() }
func (c *stubClock) advance(d time.Duration) { c.ns.Add(int64(d)) }

func TestSinceReadsTheGivenClock(t *testing.T) {
	c := &stubClock{}
	c.ns.Store(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).UnixNano())
	t0 := c.Now()
	c.advance(90 * time.Second)
	if got := since(c, t0); got != 90*time.Second {
		t.Fatalf("since = %s, want 90s on the stub clock", got)
	}
}
