package mysqllock

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/internal/testdb"
)

// The bound the package documentation states for a lost lock: after KILL CONNECTION of the
// lock's session, the section's context is cancelled (cause ErrLockLost) within one watchdog
// interval plus the check's round trip, with the default interval and with a short one.
func TestWatchdogCancelsWithinIntervalAfterKill(t *testing.T) {
	t.Parallel()
	// The check's round trip and the scheduling of a loaded test machine.
	const slack = 750 * time.Millisecond
	for _, c := range []struct {
		name  string
		opts  []Option
		every time.Duration
	}{
		{"default", nil, time.Second}, // what WithWatchdog's documentation says
		{"WithWatchdog(300ms)", []Option{WithWatchdog(300 * time.Millisecond)}, 300 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			d := testdb.New(t)
			ln := lockName(d, "bound")
			l := New(d.Open(t), append(c.opts, WithReporter(&recorder{}))...)
			holding := make(chan struct{})
			type res struct {
				at    time.Time
				cause error
				err   error
			}
			out := make(chan res, 1)
			go func() {
				var r res
				_, r.err = l.TryDo(context.Background(), ln, func(ctx context.Context) error {
					close(holding)
					select {
					case <-ctx.Done():
						r.at, r.cause = time.Now(), context.Cause(ctx)
						return ctx.Err()
					case <-time.After(30 * time.Second):
						return errors.New("the watchdog never cancelled fn")
					}
				})
				out <- r
			}()
			<-holding
			id := holder(t, d.DB, ln)
			if id == 0 {
				t.Fatal("nobody holds the lock while fn runs")
			}
			killed := time.Now()
			d.MustExec(t, fmt.Sprintf("KILL CONNECTION %d", id))
			r := <-out
			if r.at.IsZero() {
				t.Fatalf("fn was not cancelled: %v", r.err)
			}
			if !errors.Is(r.cause, ErrLockLost) || !errors.Is(r.err, ErrLockLost) {
				t.Fatalf("cause %v, TryDo error %v: want ErrLockLost in both", r.cause, r.err)
			}
			if took := r.at.Sub(killed); took > c.every+slack {
				t.Fatalf("fn's context cancelled %v after the KILL, want within the watchdog interval %v (+%v)", took, c.every, slack)
			}
		})
	}
}
