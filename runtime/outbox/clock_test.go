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

// aheadClock is the wall clock plus an offset a test moves forward: the worker reads as passed
// a wait that never happened. Safe for concurrent use.
type aheadClock struct{ ahead atomic.Int64 }

func (c *aheadClock) Now() time.Time          { return time.Now().Add(time.Duration(c.ahead.Load())) }
func (c *aheadClock) advance(d time.Duration) { c.ahead.Add(int64(d)) }

// clockAhead gives w an aheadClock; call it before start.
func clockAhead(w *Worker) *aheadClock {
	c := &aheadClock{}
	w.clock = c
	return c
}

func TestAheadClockAdvances(t *testing.T) {
	c := &aheadClock{}
	before := time.Now()
	c.advance(time.Hour)
	if got := c.Now().Sub(before); got < time.Hour {
		t.Fatalf("an hour ahead, the clock read %s after the wall clock, want at least 1h", got)
	}
}
