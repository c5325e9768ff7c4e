// Drain: the worker's cycle run once over, synchronously, for tests. It uses the same claim,
// handler call (middleware included) and fenced result writes as Run, one message at a time.

package outbox

import (
	"context"
	"errors"
	"fmt"
)

// DrainOptions changes how Worker.Drain treats a failed attempt.
type DrainOptions struct {
	// RetryNow makes a retried message due again at once instead of after its backoff (or the
	// handler's RetryAfter), so the same Drain delivers it again. Defaults to false.
	RetryNow bool
}

// DrainCounts says what a Drain recorded: Sent and Failed count the messages that reached SENT
// or FAILED, Retried the failed attempts rescheduled for another one.
type DrainCounts struct {
	Sent, Retried, Failed int
}

// Drain delivers, in the calling goroutine, every message of the router's types that is due:
// it claims them as Run does, calls their handlers one at a time (with the event's timeout, the
// Config's Middleware and panic recovery) and records each result before the next handler
// runs, then claims again, until a claim finds nothing due. Messages the handlers enqueue and
// commit are due at once, so the same Drain delivers them too; the messages of an ordering key
// are delivered in its order, as each send releases the next. It never waits for a poll; a
// message retried with a backoff is not due, and is left for later unless opts.RetryNow.
//
// Drain is for tests (runtime/outboxtest wraps it): a service runs Run. It refuses to run
// while Run or another Drain of w runs. When ctx ends, the handler running keeps its result,
// the rows claimed but not yet handled are given back (PENDING, due at once, the attempt not
// counted), and Drain returns the counts so far and an error wrapping ctx's. A database error
// ends Drain with the error.
func (w *Worker) Drain(ctx context.Context, opts DrainOptions) (DrainCounts, error) {
	var counts DrainCounts
	if !w.running.CompareAndSwap(false, true) {
		return counts, errors.New("outbox: Worker.Drain: the worker is running")
	}
	defer w.running.Store(false)
	if opts.RetryNow {
		// A route whose backoff is zero retries at once, and its log line says so.
		saved := w.router
		w.router = saved.snapshot()
		for t, rt := range w.router.routes {
			rt.policy.Backoff = Backoff{}
			w.router.routes[t] = rt
		}
		defer func() { w.router = saved }()
	}
	for {
		if err := ctx.Err(); err != nil {
			return counts, fmt.Errorf("outbox: Worker.Drain: %w", err)
		}
		rows, _, err := w.claim(ctx, w.cfg.BatchSize, claimPos{})
		if err != nil {
			return counts, fmt.Errorf("outbox: Worker.Drain: %w", err)
		}
		if len(rows) == 0 {
			return counts, nil
		}
		for _, m := range rows {
			var res result
			if ctx.Err() != nil {
				res = w.giveBack(m, "the drain's context ended before its handler started")
			} else {
				res = w.handle(ctx, m)
			}
			if opts.RetryNow && res.outcome == OutcomeRetried && !res.givenBack {
				res.delay = 0 // the handler's RetryAfter too
			}
			// The result is written even when ctx has ended: the handler's work is done, and a
			// row left PROCESSING would wait for its lease.
			wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
			written, _, err := w.writeResultsTx(wctx, []result{res})
			cancel()
			if err != nil {
				return counts, fmt.Errorf("outbox: Worker.Drain: record message %d: %w", m.id, err)
			}
			if written == 1 && !res.givenBack {
				switch res.outcome {
				case OutcomeSent:
					counts.Sent++
				case OutcomeRetried:
					counts.Retried++
				case OutcomeFailed:
					counts.Failed++
				}
			}
		}
	}
}
