package mysqllock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/internal/testdb"
)

// Do waits as long as it is asked to, fractions of a second included, on every server. MySQL
// rounds GET_LOCK's timeout to whole seconds (0.4 returned 0 at once, 1.4 gave up after 1 s),
// which a single GET_LOCK(name, wait) call cannot get right. The bounds are loose on purpose:
// a busy machine is late, never early.
func TestDoHonoursFractionalWaits(t *testing.T) {
	t.Parallel()
	const slack = 3 * time.Second // how late a loaded machine may be; never how early
	cases := []struct {
		name    string
		wait    time.Duration
		release time.Duration // the holder releases this long after Do starts; 0: never
		ran     bool
	}{
		{"a held lock makes a 400ms wait run out, not return at once", 400 * time.Millisecond, 0, false},
		{"a held lock makes a 1.4s wait run out, not after 1s", 1400 * time.Millisecond, 0, false},
		{"a lock freed during a 1.5s wait is taken", 1500 * time.Millisecond, 300 * time.Millisecond, true},
		{"a lock freed during a sub-second wait is taken", 900 * time.Millisecond, 300 * time.Millisecond, true},
		// Freed after the first whole second: the fraction after it must still be waited for.
		{"a lock freed in the fraction after the whole seconds is taken", 1490 * time.Millisecond, 1100 * time.Millisecond, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			d := testdb.New(t)
			ln := lockName(d, "fraction")
			holderL := New(d.Open(t), WithWatchdog(0))
			wdb := d.Open(t)
			waiter := New(wdb, WithReporter(&recorder{}), WithWatchdog(0))
			release := holdLock(t, holderL, ln)
			start := time.Now()
			released := make(chan struct{})
			if c.release > 0 {
				go func() {
					time.Sleep(time.Until(start.Add(c.release)))
					release()
					close(released)
				}()
			}
			var took time.Duration
			ran, err := waiter.Do(context.Background(), ln, c.wait, func(context.Context) error {
				took = time.Since(start)
				return nil
			})
			elapsed := time.Since(start)
			if c.release > 0 {
				<-released
			} else {
				release()
			}
			t.Logf("wait %v, release after %v: ran=%v err=%v, returned after %v (fn at %v)", c.wait, c.release, ran, err, elapsed, took)
			if err != nil || ran != c.ran {
				t.Fatalf("ran=%v err=%v, want ran=%v and no error", ran, err, c.ran)
			}
			if !c.ran {
				if elapsed < c.wait || elapsed > c.wait+slack {
					t.Fatalf("Do gave up after %v, want the whole wait of %v (and not far beyond)", elapsed, c.wait)
				}
				return
			}
			if took < c.release || took > c.release+slack {
				t.Fatalf("the lock was taken %v after Do started, want soon after the release at %v", took, c.release)
			}
			if s := wdb.Stats(); s.InUse != 0 {
				t.Fatalf("waiter pool %+v: the lock's connection was not given back", s)
			}
		})
	}
}

// Cancelling ctx in the polled part of a wait ends it promptly with ctx's error; the session
// holds nothing then, so its connection goes back to the pool rather than being destroyed.
func TestDoWaitCancelledWhilePolling(t *testing.T) {
	t.Parallel()
	d := testdb.New(t)
	ln := lockName(d, "busy-poll")
	holderL := New(d.Open(t), WithWatchdog(0))
	defer holdLock(t, holderL, ln)()
	// The cancel lands between two polls almost always; on a loaded machine it can land while a
	// GET_LOCK(name, 0) is in flight, and the driver then closes that connection, as it must.
	// The claim under test is the first case, so a run that hit the second is tried again.
	for try := 1; ; try++ {
		rec := &recorder{}
		wdb := d.Open(t)
		waiter := New(wdb, WithReporter(rec))
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		start := time.Now()
		ran, err := waiter.Do(ctx, ln, 990*time.Millisecond, func(context.Context) error {
			t.Error("fn ran without the lock")
			return nil
		})
		cancel()
		if ran || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("ran=%v err=%v, want the context's deadline error", ran, err)
		}
		if waited := time.Since(start); waited > 900*time.Millisecond {
			t.Fatalf("Do returned after %v, want soon after the 100ms cancellation, not at the end of the wait", waited)
		}
		if len(rec.all()) != 0 {
			t.Fatalf("incidents %q: the caller's own cancellation is not one", rec.kinds())
		}
		s := wdb.Stats()
		if s.InUse != 0 {
			t.Fatalf("waiter pool %+v: the connection is still in use", s)
		}
		if s.OpenConnections == 1 {
			return
		}
		if try == 5 {
			t.Fatalf("waiter pool %+v after %d tries: want the connection back in the pool, idle", s, try)
		}
		t.Logf("try %d: the cancel landed inside a poll and the connection was closed; again", try)
	}
}
