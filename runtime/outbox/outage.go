// Outages. A database that stops answering turns every poll into a failure. The loops back
// off. They log once per change of state, not at every attempt. The states are down, still
// down every outageRepeat, and back. An operator thus reads three lines, not thousands.

package outbox

import (
	"context"
	"log/slog"
	"time"
)

const (
	// outageRepeat is how often a continuing failure is logged again.
	outageRepeat = time.Minute
	// outageBackoffMax caps the claim loop's wait between failed claims, unless PollInterval
	// is longer. The worker notices a recovered database within it.
	outageBackoffMax = 5 * time.Second
)

// outage tracks the failures of one loop, such as the claim or the reclaim. One goroutine
// alone uses it.
type outage struct {
	what     string
	failures int
	since    time.Time
	logged   time.Time
}

// fail records a failure and logs it when it starts an outage or outageRepeat has passed.
func (o *outage) fail(ctx context.Context, log *slog.Logger, err error) {
	now := time.Now()
	o.failures++
	switch {
	case o.failures == 1:
		o.since, o.logged = now, now
		log.LogAttrs(ctx, slog.LevelError, "outbox "+o.what+" failed", slog.String("error", err.Error()))
	case now.Sub(o.logged) >= outageRepeat:
		o.logged = now
		log.LogAttrs(ctx, slog.LevelError, "outbox "+o.what+" still failing",
			slog.Duration("failing_for", now.Sub(o.since).Round(time.Second)), slog.Int("failures", o.failures),
			slog.String("error", err.Error()))
	}
}

// ok ends an outage, saying so when there was one.
func (o *outage) ok(ctx context.Context, log *slog.Logger) {
	if o.failures == 0 {
		return
	}
	log.LogAttrs(ctx, slog.LevelInfo, "outbox "+o.what+" recovered",
		slog.Duration("failed_for", time.Since(o.since).Round(time.Millisecond)), slog.Int("failures", o.failures))
	o.failures = 0
}

// backoff is how long to wait before the next try. It is base while all is well. It then
// doubles per failure up to max(base, outageBackoffMax).
func (o *outage) backoff(base time.Duration) time.Duration {
	if o.failures == 0 {
		return base
	}
	return min(base<<min(o.failures, 16), max(base, outageBackoffMax))
}
