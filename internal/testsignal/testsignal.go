// Package testsignal carries events from code under test to the test that waits for them.
//
// A Signal is a field of the code under test: it does nothing until a test calls Init, so
// production code pays one nil check per Signal call. A test inits the signals it waits on
// before it starts the code, then calls WaitOrTimeout instead of sleeping for a guess.
package testsignal

import (
	"time"
)

// bufferSize is how many values an inited Signal holds for a test that has not read them.
// Values beyond it are dropped, so a test that inits a signal it never reads does not block
// the code under test.
const bufferSize = 1000

// WaitTimeout is how long WaitOrTimeout waits: long enough for a loaded CI machine, short
// enough that a missing event fails the test instead of the test binary's deadline.
const WaitTimeout = 10 * time.Second

// TB is the part of testing.TB a Signal uses, so that production code need not import testing.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// Signal is a channel of T that is nil, and Signal a no-op, until Init.
type Signal[T any] struct {
	ch chan T
	tb TB
}

// Init enables the signal for tb's test. Call it before the code under test starts.
func (s *Signal[T]) Init(tb TB) {
	s.ch = make(chan T, bufferSize)
	s.tb = tb
}

// Signal sends v to a test that inited s; it never blocks.
func (s *Signal[T]) Signal(v T) {
	if s.ch == nil {
		return
	}
	select {
	case s.ch <- v:
	default:
	}
}

// WaitOrTimeout returns the next value sent, failing the test after WaitTimeout.
func (s *Signal[T]) WaitOrTimeout() T {
	s.tb.Helper()
	return s.WaitFor(WaitTimeout)
}

// WaitFor returns the next value sent, failing the test after timeout.
func (s *Signal[T]) WaitFor(timeout time.Duration) T {
	s.tb.Helper()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case v := <-s.ch:
		return v
	case <-t.C:
		s.tb.Fatalf("testsignal: no signal within %s", timeout)
		var zero T
		return zero
	}
}

// Clear drops the values sent so far, so that the next WaitOrTimeout returns a later event.
func (s *Signal[T]) Clear() {
	for {
		select {
		case <-s.ch:
		default:
			return
		}
	}
}

// RequireEmpty fails the test if a value was sent and not read.
func (s *Signal[T]) RequireEmpty() {
	s.tb.Helper()
	select {
	case v := <-s.ch:
		s.tb.Fatalf("testsignal: want no signal, got %v", v)
	default:
	}
}
