// Step 2 of the worker's cycle, the dispatch. Each claimed row's handler runs in its own
// goroutine once it holds a dispatch slot, with its event's timeout and panic recovery. Its
// error decides the outcome, a retry with backoff or FAILED.

package outbox

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/outboxgen/outboxgen/runtime/incident"
)

// startDispatch is step 2 for one row. Its handler runs in its own goroutine, outside every
// transaction, once it holds a dispatch slot. That is at once, unless the row was prefetched.
func (w *Worker) startDispatch(m claimed) {
	w.dispatch.Add(1)
	w.runDispatch(m)
}

// runDispatch is startDispatch after w.dispatch.Add(1).
func (w *Worker) runDispatch(m claimed) {
	w.mu.Lock()
	hctx, sink, gen, sem, stop := w.hctx, w.sink, w.gen, w.sem, w.stop
	queued := w.queueLocked(m)
	w.mu.Unlock()
	go func() {
		defer w.dispatch.Done()
		res, ran, ok := w.acquireAndHandle(hctx, sem, stop, m, queued)
		w.mu.Lock()
		delete(w.inflight, m.id)
		if w.gen == gen {
			w.free++
			w.limitDoneLocked(m.eventType)
			if ran {
				took := float64(since(w.clock, res.started))
				if w.avgTook == 0 {
					w.avgTook = took
				} else {
					w.avgTook += handlerEWMAWeight * (took - w.avgTook)
				}
			}
		}
		w.mu.Unlock()
		if ok && !sink.put(res) {
			// Run has returned, because this handler ignored its context past the shutdown
			// deadline. Nothing may write any more, so the lease expires and the row is
			// reclaimed.
			w.log.LogAttrs(context.Background(), slog.LevelWarn, "outbox result after shutdown dropped; the row will be reclaimed",
				slog.Int64("message_id", int64(m.id)), slog.String("event_type", m.eventType), slog.String("outcome", string(res.outcome)))
		}
		w.signalFreed()
	}()
}

// acquireAndHandle waits for a dispatch slot and runs the handler. ran says whether the
// handler ran.
//
// Once Run's context has ended, no handler starts. A queued row is left to Run's give-back,
// and ok is false, as there is no result to write. A row handed off too late to be queued is
// given back here.
//
// A row's claim may have begun so long ago that its handler could outlive the lease. It may be
// a prefetched row that waited for a slot, or a claim whose answer came back late. Such a row
// could be reclaimed and run twice, or out of its key's order. It is given back unhandled too,
// PENDING again and due at once, if the fence still lets the write through.
func (w *Worker) acquireAndHandle(hctx context.Context, sem chan struct{}, stop <-chan struct{}, m claimed, queued bool) (res result, ran, ok bool) {
	const stopped = "the worker shut down before its handler started"
	select {
	case sem <- struct{}{}:
	default:
		select {
		case sem <- struct{}{}:
		case <-stop:
			if queued {
				return result{}, false, false
			}
			return w.giveBack(m, stopped), false, true
		}
	}
	w.mu.Lock()
	start := w.startLocked(m, stop)
	w.mu.Unlock()
	if !start {
		<-sem
		if queued {
			return result{}, false, false
		}
		return w.giveBack(m, stopped), false, true
	}
	// Checked whether the slot was free at once or not. A claim's answer may come back late,
	// after a stalled network or a paused process. Another worker may then have reclaimed and
	// handled the row already, and for an ordered key even its successor. Handling it now
	// would deliver it out of order. The lease started at the latest when the claim began.
	rt, _ := w.router.lookup(m.eventType)
	if waited := since(w.clock, m.claimStart); waited+rt.policy.Timeout >= w.cfg.StaleAfter {
		<-sem
		return w.giveBack(m, fmt.Sprintf("%s passed since the claim began; its %s timeout would outlive the lease", waited.Round(time.Millisecond), rt.policy.Timeout)), false, true
	}
	if w.circuitHolds(m) { // circuit.go: not logged, as the circuit's own line counts them
		<-sem
		return result{id: m.id, eventType: m.eventType, token: m.token, outcome: OutcomeRetried, givenBack: true, started: w.clock.Now()}, false, true
	}
	defer func() { <-sem }()
	w.mu.Lock()
	w.inflight[m.id] = &inflight{eventType: m.eventType, attempt: m.attempt, token: m.token, started: w.clock.Now()}
	w.mu.Unlock()
	return w.handle(hctx, m), true, true
}

// giveBack is the result for a claimed row whose handler never ran, or was cut off by the
// shutdown deadline. The row becomes PENDING again, due at once, with the claim's attempt
// given back.
func (w *Worker) giveBack(m claimed, why string) result {
	w.log.LogAttrs(context.Background(), slog.LevelWarn, "outbox message given back",
		slog.Int64("message_id", int64(m.id)), slog.String("event_type", m.eventType), slog.String("reason", why))
	return result{id: m.id, eventType: m.eventType, token: m.token, outcome: OutcomeRetried, givenBack: true, started: w.clock.Now()}
}

// result is one handler outcome waiting to be written.
type result struct {
	id          MessageID
	eventType   string
	token       string
	outcome     Outcome
	delay       time.Duration // for a retry, the wait until the next attempt
	lastError   string        // retried and failed
	givenBack   bool          // retried without spending an attempt
	orderingKey string        // for an ordered message, the queue entry to delete once SENT
	orderingSeq int64
	started     time.Time // when the handler was called
}

// handle runs the handler with its timeout, recovers a panic, and decides the outcome.
func (w *Worker) handle(hctx context.Context, m claimed) result {
	rt, ok := w.router.lookup(m.eventType)
	if !ok { // unreachable, since the claim asks only for the router's types
		return result{id: m.id, eventType: m.eventType, token: m.token, outcome: OutcomeFailed,
			lastError: fmt.Sprintf("no handler for event type %q", m.eventType)}
	}
	p := rt.policy
	ctx, cancel := context.WithTimeout(hctx, p.Timeout)
	defer cancel()
	d := Delivery{
		MessageID: m.id, EventType: m.eventType, IdempotencyKey: m.key, Attempt: m.attempt,
		EnqueuedAt: m.enqueuedAt, ClaimToken: m.token, MaxAttempts: m.maxAttempts, Headers: decodeHeaders(m.headers),
		OrderingKey: m.orderingKey,
	}
	if d.IdempotencyKey == "" {
		d.IdempotencyKey = "msg:" + strconv.FormatInt(int64(m.id), 10)
	}
	// Reported once if the handler is still running well past its deadline. It ignores its
	// context and keeps its slot.
	hung := time.AfterFunc(p.Timeout+hungGrace(p.Timeout), func() {
		w.report(context.Background(), incident.Incident{
			Kind:    incident.HandlerHung,
			Subject: fmt.Sprintf("message %d (%s)", m.id, m.eventType),
			Err:     fmt.Errorf("handler still running %s after its %s timeout; it ignores its context and keeps a dispatch slot", hungGrace(p.Timeout), p.Timeout),
		})
	})
	start := w.clock.Now()
	w.observeLag(m, start) // circuit_lag.go
	// Config.Middleware included (wrapHandlers).
	err := callHandler(ctx, rt.handler, m.payload, d)
	hung.Stop()
	took := since(w.clock, start)

	res := result{id: m.id, eventType: m.eventType, token: m.token, started: start, orderingKey: m.orderingKey, orderingSeq: m.orderingSeq}
	switch {
	case err != nil && hctx.Err() != nil:
		// The shutdown deadline cancelled it. That is not the message's fault, so it is not an
		// attempt. On the last attempt it would otherwise go FAILED with "context canceled".
		res = w.giveBack(m, fmt.Sprintf("the worker shut down while the handler ran (%v)", err))
		res.started = start
		w.cfg.Observer.Handled(m.eventType, res.outcome, took)
		return res
	case err == nil:
		// Also after the deadline. The work is done, and the fence decides whether the write
		// lands.
		res.outcome = OutcomeSent
	case IsPermanent(err):
		res.outcome = OutcomeFailed
		res.lastError = fmt.Sprintf("attempt %d: %v", m.attempt, err)
	case m.attempt >= m.maxAttempts:
		res.outcome = OutcomeFailed
		res.lastError = fmt.Sprintf("attempt %d of %d: %v", m.attempt, m.maxAttempts, err)
	default:
		res.outcome = OutcomeRetried
		res.lastError = fmt.Sprintf("attempt %d of %d: %v", m.attempt, m.maxAttempts, err)
		if d, ok := retryDelay(err); ok {
			res.delay = d
		} else {
			res.delay = w.backoff(p.Backoff, m.attempt)
		}
	}
	res.lastError = truncate(res.lastError, maxLastError)
	w.cfg.Observer.Handled(m.eventType, res.outcome, took)
	if quiet := w.circuitNote(m, res.outcome, err); err != nil && !quiet {
		level := slog.LevelWarn
		if res.outcome == OutcomeFailed {
			level = slog.LevelError
		}
		attrs := []slog.Attr{slog.Int64("message_id", int64(m.id)), slog.String("event_type", m.eventType),
			slog.Int("attempt", m.attempt), slog.String("outcome", string(res.outcome))}
		if res.outcome == OutcomeRetried { // a FAILED message is not retried, and retry_in=0s would say "at once"
			attrs = append(attrs, slog.Duration("retry_in", res.delay))
		}
		attrs = append(attrs, slog.String("error", err.Error()))
		w.log.LogAttrs(context.Background(), level, "outbox handler failed", attrs...)
	}
	return res
}

func hungGrace(timeout time.Duration) time.Duration { return max(100*time.Millisecond, timeout/10) }

// callHandler turns a panic into an error carrying the stack.
func callHandler(ctx context.Context, h HandlerFunc, payload []byte, d Delivery) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v\n%s", p, debug.Stack())
		}
	}()
	return h(ctx, payload, d)
}

// backoff is the wait after a failed attempt. With b = min(Max, Initial*2^(attempt-1)), it is
// uniform between b and 1.5*b, capped at Max.
func (w *Worker) backoff(b Backoff, attempt int) time.Duration {
	base := b.Max
	if attempt <= 62 {
		if f := float64(b.Initial) * math.Pow(2, float64(attempt-1)); f < float64(b.Max) {
			base = time.Duration(f)
		}
	}
	if base <= 0 {
		return 0
	}
	// Between base and 1.5 x base, capped at Max. A retry thus never comes sooner than
	// Initial, waits grow, and instances retrying together do not stay in step.
	// validatePolicy bounds Max, so base + base/2 cannot overflow.
	return min(base+time.Duration(w.jitter(int64(base/2))), b.Max)
}

// truncate makes s fit a utf8mb4 text column. Invalid UTF-8, such as a binary or Latin-1 body
// quoted in a handler's error, becomes U+FFFD, which every sql_mode accepts. Raw, it would be
// error 1300 and fail the whole result batch. A long s is cut at a character boundary to at
// most n bytes.
func truncate(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	const mark = " …(truncated)"
	if len(s) <= n {
		return s
	}
	s = s[:n-len(mark)]
	for len(s) > 0 { // drop the bytes of a character the cut split
		if r, size := utf8.DecodeLastRuneInString(s); r != utf8.RuneError || size > 1 {
			break
		}
		s = s[:len(s)-1]
	}
	return s + mark
}

// reportAbandoned reports the handlers still running after the shutdown deadline.
func (w *Worker) reportAbandoned(ctx context.Context) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for id, f := range w.inflight {
		w.report(ctx, incident.Incident{
			Kind:    incident.HandlerHung,
			Subject: fmt.Sprintf("message %d (%s)", id, f.eventType),
			Err: fmt.Errorf("handler still running %s after its context was cancelled at shutdown; Run returns without it and the row is reclaimed after its lease",
				since(w.clock, f.started).Round(time.Millisecond)),
		})
	}
}
