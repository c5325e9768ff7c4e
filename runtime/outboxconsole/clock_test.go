package outboxconsole

import (
	"sync"
	"time"
)

// testClock is the console's clock in a test: the real time plus an offset the test sets.
type testClock struct {
	mu  sync.Mutex
	off time.Duration
}

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.off)
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.off += d
}

// withClock gives the console a test clock.
func withClock(c *testClock) Option { return func(cfg *config) { cfg.now = c.now } }
