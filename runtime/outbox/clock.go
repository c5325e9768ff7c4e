// The worker's clock: the worker and its maintenance read the time through it, so that a test
// can decide what "now" is (River's baseservice carries its clock the same way).

package outbox

import "time"

// clock tells the time. Timers and tickers stay on the time package: what a test controls is
// the time the worker's decisions read, not how long it waits.
type clock interface {
	Now() time.Time
}

// realClock is the wall clock; every Worker starts with it.
type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

// since is time.Since on c.
func since(c clock, t time.Time) time.Duration { return c.Now().Sub(t) }

// until is time.Until on c.
func until(c clock, t time.Time) time.Duration { return t.Sub(c.Now()) }
