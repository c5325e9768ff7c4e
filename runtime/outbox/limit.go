// Limits per event type: Policy.Concurrency and Policy.RateLimit. A type at its concurrency
// limit drops out of the claim's types as a paused type does, and a type below it is claimed
// apart, for no more rows than it has slots free and, when rate-limited, tokens. Other types
// are claimed as before, in one claim whose SQL does not change. A worker whose router has no
// limit pays nothing for them.

package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/outboxgen/outboxgen/runtime/internal/store"
)

// claimGate lets claimOf lower a claim's size inside its transaction and hear what it took
// before the commit.
type claimGate interface {
	admit(ctx context.Context, db store.DBTX, n int) (int, error)
	took(ctx context.Context, db store.DBTX, got int) error
}

// limitState is a worker's bookkeeping of its limited types. Its fields are guarded by w.mu.
type limitState struct {
	// busy counts, per concurrency-limited type, the rows claimed or handed off in this Run
	// whose dispatch has not ended. It is reset when a Run starts.
	busy map[string]int
	// backlog says the type's last claim took all it was allowed, so more rows may wait.
	backlog map[string]bool
	next    int         // rotates the order in which limited types are claimed
	wake    *time.Timer // the pending wake for a bucket's refill
	wakeAt  time.Time
}

// maxTypeConcurrency bounds Policy.Concurrency, as far beyond any worker's slots as makes sense.
const maxTypeConcurrency = 100_000

// minLimitWake spaces the claims a rate-limited backlog makes, so that each takes a few tokens
// rather than one.
const minLimitWake = 100 * time.Millisecond

// limitProblems is validatePolicy's part for the limits.
func limitProblems(p Policy) []string {
	var bad []string
	if p.Concurrency < 0 || p.Concurrency > maxTypeConcurrency {
		bad = append(bad, fmt.Sprintf("Concurrency %d is not in 0..%d", p.Concurrency, maxTypeConcurrency))
	}
	if s := rateProblem(p.RateLimit); s != "" {
		bad = append(bad, s)
	}
	return bad
}

// limited says whether p limits its type.
func limited(p Policy) bool { return p.Concurrency > 0 || !p.RateLimit.IsZero() }

// resetLimitsLocked starts a Run's bookkeeping. w.mu is held.
func (w *Worker) resetLimitsLocked() {
	w.limits.busy = map[string]int{}
	w.limits.backlog = map[string]bool{}
}

// claimLimited claims up to n rows of the types not paused, honouring each type's limits. It
// returns the rows and the latest position among those of unlimited types, the one the next
// claim may seek from. Rows claimed before an error are returned with it.
func (w *Worker) claimLimited(ctx context.Context, n int, from claimPos) (rows []claimed, last claimPos, more bool, err error) {
	types := w.circuitClosedTypes(w.claimTypes(ctx))
	plain := types
	var lim []string
	for i, t := range types {
		if rt, _ := w.router.lookup(t); limited(rt.policy) {
			if lim == nil {
				plain = append(make([]string, 0, len(types)), types[:i]...)
			}
			lim = append(lim, t)
		} else if lim != nil {
			plain = append(plain, t)
		}
	}
	if len(lim) == 0 {
		rows, more, err = w.claimOf(ctx, n, from, types, nil)
		return rows, lastPos(rows), more, err
	}
	// Limited types claim first, so that a backlog of others cannot starve them. They take at
	// most half of the slots while other types share the claim, so neither starves the other.
	budget := n
	if len(plain) > 0 {
		budget = max(1, n/2)
	}
	w.mu.Lock()
	w.limits.next++
	start := w.limits.next
	w.mu.Unlock()
	for i := range lim {
		if budget <= len(rows) {
			break
		}
		t := lim[(start+i)%len(lim)]
		got, err := w.claimType(ctx, t, budget-len(rows))
		rows = append(rows, got...)
		if err != nil {
			return rows, claimPos{}, false, err
		}
	}
	if len(plain) == 0 {
		return rows, claimPos{}, false, nil
	}
	got, more, err := w.claimOf(ctx, n-len(rows), from, plain, nil)
	return append(rows, got...), lastPos(got), more, err
}

// claimType claims up to n rows of the limited type t, fewer when its free slots or tokens
// say so. Its claims scan from the front of the claim index: a limited type's rows are few
// per claim, so seeking gains nothing.
func (w *Worker) claimType(ctx context.Context, t string, n int) ([]claimed, error) {
	rt, _ := w.router.lookup(t)
	p := rt.policy
	w.mu.Lock()
	if p.Concurrency > 0 {
		n = min(n, p.Concurrency-w.limits.busy[t])
		if n > 0 {
			w.limits.busy[t] += n // reserved now, so a hand-off meanwhile cannot overrun them
		} else {
			// Rows may wait unseen, so the next slot to free wakes a claim.
			w.limits.backlog[t] = true
		}
	}
	w.mu.Unlock()
	if n <= 0 {
		return nil, nil
	}
	var gate *rateGate
	var cg claimGate
	if !p.RateLimit.IsZero() {
		gate = &rateGate{eventType: t, rate: p.RateLimit}
		cg = gate
	}
	rows, _, err := w.claimOf(ctx, n, claimPos{}, []string{t}, cg)
	w.mu.Lock()
	if p.Concurrency > 0 {
		w.limits.busy[t] -= n - len(rows)
	}
	allowed := n
	if gate != nil {
		allowed = gate.admitted
	}
	if err == nil && (allowed > 0 || gate == nil) {
		w.limits.backlog[t] = len(rows) == allowed
	}
	// A rate-limited type with a backlog is claimed again once its bucket holds a few tokens,
	// whatever the poll interval.
	if err == nil && gate != nil && w.limits.backlog[t] && len(rows) == gate.admitted {
		want := max(1, min(n, int(time.Duration(p.RateLimit.N)*minLimitWake/p.RateLimit.Per)))
		w.wakeAfterLocked(max(minLimitWake, untilTokens(gate.tokens, want, p.RateLimit)))
	}
	w.mu.Unlock()
	return rows, err
}

// wakeAfterLocked makes the claim loop claim again after d, unless a wake is due sooner.
// w.mu is held.
func (w *Worker) wakeAfterLocked(d time.Duration) {
	at := time.Now().Add(d)
	l := &w.limits
	if l.wake != nil && !l.wakeAt.IsZero() && l.wakeAt.Before(at) && time.Until(l.wakeAt) > 0 {
		return
	}
	l.wakeAt = at
	if l.wake == nil {
		l.wake = time.AfterFunc(d, w.Wake)
		return
	}
	l.wake.Reset(d)
}

// limitDoneLocked ends the dispatch of a row of eventType in the current Run. A type that was
// at its concurrency limit with rows waiting wakes the claim loop, so its next row starts
// without waiting for a poll. w.mu is held.
func (w *Worker) limitDoneLocked(eventType string) {
	n, ok := w.limits.busy[eventType]
	if !ok {
		return
	}
	if n <= 1 {
		delete(w.limits.busy, eventType)
	} else {
		w.limits.busy[eventType] = n - 1
	}
	if rt, _ := w.router.lookup(eventType); n == rt.policy.Concurrency && w.limits.backlog[eventType] {
		w.Wake()
	}
}

// limitHandoffLocked says whether a message of eventType may be handed off, and takes its
// concurrency slot when it may. A rate-limited type is never handed off: its token is taken in
// the database, which the hand-off would have to do inside the caller's transaction, holding
// the bucket's lock until that commits. It waits for a claim instead. w.mu is held.
func (w *Worker) limitHandoffLocked(eventType string) bool {
	rt, _ := w.router.lookup(eventType)
	p := rt.policy
	if !p.RateLimit.IsZero() {
		return false
	}
	if p.Concurrency > 0 {
		if w.limits.busy[eventType] >= p.Concurrency {
			w.limits.backlog[eventType] = true // the message waits: the next slot to free wakes a claim
			return false
		}
		w.limits.busy[eventType]++
	}
	return true
}

// limitUnhandoff returns the concurrency slot of a hand-off that did not happen, unless it
// belonged to an earlier Run.
func (w *Worker) limitUnhandoff(gen int, eventType string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.gen == gen {
		w.limitDoneLocked(eventType)
	}
}

// limitProbe takes a concurrency slot of eventType for a circuit's probe, and says
// whether there was one. The probe's dispatch frees it like any other. A probe skips the
// rate limit: it is one message now and then.
func (w *Worker) limitProbe(eventType string) bool {
	rt, _ := w.router.lookup(eventType)
	if rt.policy.Concurrency <= 0 {
		return true
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.limits.busy[eventType] >= rt.policy.Concurrency {
		return false
	}
	w.limits.busy[eventType]++
	return true
}

// limitProbeUndo gives back the slot of a probe that found no message.
func (w *Worker) limitProbeUndo(eventType string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.limitDoneLocked(eventType)
}
