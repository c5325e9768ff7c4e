// A circuit per event type, in the worker's memory. When the handlers of a type keep failing,
// the worker stops claiming the type as a whole instead of spending every message's attempts
// on a provider that is down. It then claims one message of the type now and then, a probe,
// and the probe's success claims the type again. The claim's list of types shrinks as it does
// for a pause, so the claim's SQL stays as it is and other types are never delayed.

package outbox

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/outboxgen/outboxgen/internal/testsignal"
	"github.com/outboxgen/outboxgen/runtime/outboxlabel"
)

const (
	// circuitFailures distinct messages of a type must fail within circuitWindow, with no
	// success between, to open its circuit. Distinct messages, so that one message's own
	// retries never open it.
	circuitFailures = 5
	circuitWindow   = 30 * time.Second
	// The wait between probes starts at circuitProbeFirst and doubles after each failed probe,
	// up to circuitProbeMax. The bound keeps the wait after the provider recovers short.
	circuitProbeFirst = time.Second
	circuitProbeMax   = 10 * time.Second
)

// circuits holds the worker's circuit of each event type that failed lately.
type circuits struct {
	mu     sync.Mutex
	byType map[string]*circuit
	// changed is a test signal: a circuit opened (true) or closed (false), after its log line.
	changed testsignal.Signal[bool]
}

// circuit is the state of one event type. A type with no entry is closed and healthy.
type circuit struct {
	failed   map[MessageID]time.Time // retryable failures since the last success, by message, at most circuitWindow old
	since    time.Time               // the first failure since the last success
	failures int                     // failed attempts since then, a message's retries included
	open     bool
	openedAt time.Time
	// While open: the next probe's time, the wait before the one after it, and the probe in
	// flight, if any, with when it was claimed.
	probeAt    time.Time
	probeEvery time.Duration
	probe      MessageID
	probeFrom  time.Time
	lastError  string // the newest failure's error, for the opening's log line
}

// circuitNote records a handler's outcome in its type's circuit. err is the handler's error.
// quiet says to leave out the attempt's own log line, since the circuit is open and its
// closing line counts the failures instead. An outcome that gives the message up is
// always logged.
func (w *Worker) circuitNote(m claimed, outcome Outcome, err error) (quiet bool) {
	cs := &w.circuits
	now := w.clock.Now()
	cs.mu.Lock()
	defer cs.mu.Unlock()
	c := cs.byType[m.eventType]
	switch {
	case err == nil:
		if c == nil {
			return false
		}
		delete(cs.byType, m.eventType)
		if c.open {
			w.circuitLog(m.eventType, false, c, now)
		}
		return false
	case IsPermanent(err):
		// The message is at fault, not the type's provider.
		return false
	}
	if c == nil {
		c = &circuit{failed: map[MessageID]time.Time{}, since: now}
		if cs.byType == nil {
			cs.byType = map[string]*circuit{}
		}
		cs.byType[m.eventType] = c
	}
	c.failures++
	c.lastError = err.Error()
	if c.open {
		if c.probe == m.id {
			c.probe = 0
			c.probeEvery = min(2*c.probeEvery, circuitProbeMax)
			c.probeAt = now.Add(c.probeEvery)
		}
		return outcome == OutcomeRetried
	}
	c.failed[m.id] = now
	for id, at := range c.failed {
		if now.Sub(at) > circuitWindow {
			delete(c.failed, id)
		}
	}
	if len(c.failed) >= circuitFailures {
		c.open, c.openedAt = true, now
		c.probeEvery = circuitProbeFirst
		c.probeAt = now.Add(c.probeEvery)
		w.circuitLog(m.eventType, true, c, now)
	}
	return false
}

// circuitLog writes the one line of a state change, under cs.mu. The count of messages
// waiting is read from the table in the background, so no handler's result waits for it.
func (w *Worker) circuitLog(eventType string, opened bool, c *circuit, now time.Time) {
	attrs := []slog.Attr{
		slog.String("event_type", outboxlabel.Escape(eventType)),
		slog.Time("failing_since", c.since.UTC()),
		slog.Int("failures", c.failures),
	}
	msg, level := "outbox circuit closed; the event type is claimed again", slog.LevelInfo
	if opened {
		msg, level = "outbox circuit opened; the event type is backed off as a whole and probed", slog.LevelWarn
		attrs = append(attrs, slog.Int("messages_failed", len(c.failed)), slog.Duration("probe_in", c.probeEvery),
			slog.String("last_error", outboxlabel.Escape(truncate(c.lastError, 500))))
	} else {
		attrs = append(attrs, slog.Duration("open_for", now.Sub(c.openedAt)))
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
		defer cancel()
		if n, err := q.CircuitWaiting(ctx, w.db, eventType); err == nil {
			attrs = append(attrs, slog.Int64("messages_waiting", n))
		}
		w.log.LogAttrs(ctx, level, msg, attrs...)
		w.circuits.changed.Signal(opened)
	}()
}

// circuitOpen says whether eventType's circuit is open, for the hand-off, which then leaves
// the message PENDING for a claim.
func (w *Worker) circuitOpen(eventType string) bool {
	w.circuits.mu.Lock()
	defer w.circuits.mu.Unlock()
	c := w.circuits.byType[eventType]
	return c != nil && c.open
}

// circuitHolds says a claimed message must not run, because its type's circuit opened after
// the claim and the message is not the type's probe. Its row is given back instead, with its
// attempt returned.
func (w *Worker) circuitHolds(m claimed) bool {
	w.circuits.mu.Lock()
	defer w.circuits.mu.Unlock()
	c := w.circuits.byType[m.eventType]
	return c != nil && c.open && c.probe != m.id
}

// circuitClosedTypes is types less those whose circuit is open, for one claim.
func (w *Worker) circuitClosedTypes(types []string) []string {
	cs := &w.circuits
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if len(cs.byType) == 0 {
		return types
	}
	out := make([]string, 0, len(types))
	for _, t := range types {
		if c := cs.byType[t]; c == nil || !c.open {
			out = append(out, t)
		}
	}
	return out
}

// probesDue returns up to n types of open circuits whose next probe is due and that have no
// probe in flight. A probe whose result never came, as when its row was given back at
// shutdown, is forgotten after a lease.
func (w *Worker) probesDue(n int, paused map[string]bool) []string {
	cs := &w.circuits
	now := w.clock.Now()
	cs.mu.Lock()
	defer cs.mu.Unlock()
	var out []string
	for t, c := range cs.byType {
		if len(out) >= n {
			break
		}
		if !c.open || paused[t] || now.Before(c.probeAt) {
			continue
		}
		if c.probe != 0 && now.Sub(c.probeFrom) < w.cfg.StaleAfter {
			continue
		}
		out = append(out, t)
	}
	return out
}

// probeClaimed records the outcome of a probe's claim. With a row, it is the probe in flight.
// Without one, the type had nothing due, and the next probe waits another interval.
func (w *Worker) probeClaimed(eventType string, id MessageID) {
	cs := &w.circuits
	now := w.clock.Now()
	cs.mu.Lock()
	defer cs.mu.Unlock()
	c := cs.byType[eventType]
	if c == nil || !c.open {
		return
	}
	c.probeAt = now.Add(c.probeEvery)
	if id != 0 {
		c.probe, c.probeFrom = id, now
	}
}

// CircuitOpen lists the event types of this worker's router whose circuit is open now: their
// handlers kept failing, and the worker claims only a probe of each now and then.
func (w *Worker) CircuitOpen() []string {
	w.circuits.mu.Lock()
	defer w.circuits.mu.Unlock()
	var out []string
	for _, t := range w.types {
		if c := w.circuits.byType[t]; c != nil && c.open {
			out = append(out, t)
		}
	}
	return out
}
