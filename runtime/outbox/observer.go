package outbox

import "time"

// Outcome is what the worker recorded for one handler call.
type Outcome string

const (
	OutcomeSent    Outcome = "sent"    // the handler returned nil, and the row is SENT
	OutcomeRetried Outcome = "retried" // the handler failed with attempts left, and the row is PENDING with backoff
	OutcomeFailed  Outcome = "failed"  // a permanent error, exhausted attempts or an undecodable payload made the row FAILED
)

// Observer receives the worker's events, for metrics. runtime/outboxprom adapts it to
// Prometheus without making the core depend on Prometheus. Methods are called from the
// worker's goroutines and must be fast, non-blocking and safe for concurrent use.
type Observer interface {
	// Claimed says one claim transaction took d and claimed n rows. n may be 0. Messages that
	// InTx hands off to a worker of its process pass through no claim. An Observer that also
	// implements HandoffObserver hears of them.
	Claimed(n int, d time.Duration)
	// Handled says a handler call for eventType ended with outcome after d.
	Handled(eventType string, outcome Outcome, d time.Duration)
	// Reclaimed says a reclaim pass moved n stale rows back to PENDING, or to FAILED when their
	// attempts were spent.
	Reclaimed(n int64)
	// Stuck says a watch pass saw n rows PROCESSING past three times their lease. It comes
	// only for n > 0.
	Stuck(n int64)
}

// HandoffObserver is an optional extension of Observer. A worker whose Observer implements it
// reports each message InTx handed off to it. Such a message is born claimed by that worker
// and passes through no claim transaction, so Claimed never counts it. An Observer that counts
// consumed messages adds these to get them all. One that times claims leaves them out.
type HandoffObserver interface {
	// HandedOff says n messages were handed off to the worker, which dispatches them at once.
	HandedOff(n int)
}

// LagObserver is an optional extension of Observer. A worker whose Observer implements it
// reports each message's delivery lag when its handler starts: from the enqueue's commit to
// the claim on the database clock, claimed_at - created_at, plus the local time from the claim
// to the handler's start. A message InTx handed off is claimed at its insert, so its lag is the
// local time from that insert to its handler's start. Retries count from the first enqueue.
type LagObserver interface {
	// DeliveryLag says a handler of eventType starts lag after its message was enqueued.
	DeliveryLag(eventType string, lag time.Duration)
}

// NopObserver ignores every event. Embed it to implement only some methods.
type NopObserver struct{}

func (NopObserver) Claimed(int, time.Duration)             {}
func (NopObserver) Handled(string, Outcome, time.Duration) {}
func (NopObserver) Reclaimed(int64)                        {}
func (NopObserver) Stuck(int64)                            {}
