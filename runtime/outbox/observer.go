package outbox

import "time"

// Outcome is what the worker recorded for one handler call.
type Outcome string

const (
	OutcomeSent    Outcome = "sent"    // handler returned nil: SENT
	OutcomeRetried Outcome = "retried" // handler failed, attempts remain: PENDING with backoff
	OutcomeFailed  Outcome = "failed"  // permanent error, attempts exhausted or undecodable: FAILED
)

// Observer receives the worker's events, for metrics (runtime/outboxprom adapts it to
// Prometheus without making the core depend on it). Methods are called from the worker's
// goroutines and must be fast, non-blocking and safe for concurrent use.
type Observer interface {
	// Claimed: one claim transaction took d and claimed n rows (n may be 0). Messages InTx hands
	// off to a worker of its process (see InTx) pass through no claim: an Observer that also
	// implements HandoffObserver hears of them.
	Claimed(n int, d time.Duration)
	// Handled: a handler call for eventType ended with outcome after d.
	Handled(eventType string, outcome Outcome, d time.Duration)
	// Reclaimed: a reclaim pass moved n stale rows back to PENDING (or FAILED when exhausted).
	Reclaimed(n int64)
	// Stuck: a watch pass saw n rows PROCESSING past 3x their lease (n > 0 only).
	Stuck(n int64)
}

// HandoffObserver is an optional extension of Observer. A worker whose Observer implements it
// reports each message InTx handed off to it (see InTx): born claimed by that worker, it passes
// through no claim transaction, so Claimed never counts it. An Observer that counts consumed
// messages adds these to get them all; one that times claims leaves them out.
type HandoffObserver interface {
	// HandedOff: n messages were handed off to the worker, which dispatches them now.
	HandedOff(n int)
}

// NopObserver ignores every event; embed it to implement only some methods.
type NopObserver struct{}

func (NopObserver) Claimed(int, time.Duration)             {}
func (NopObserver) Handled(string, Outcome, time.Duration) {}
func (NopObserver) Reclaimed(int64)                        {}
func (NopObserver) Stuck(int64)                            {}
