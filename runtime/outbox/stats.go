package outbox

import (
	"context"
	"fmt"
	"time"
)

// Status is a row's state in outbox_messages.
type Status string

// The states a worker writes. StatusCancelled, which only an operator writes, is in cancel.go.
const (
	StatusPending    Status = "PENDING"    // waiting for next_attempt_at, then claimable
	StatusProcessing Status = "PROCESSING" // claimed, with a lease that ends at reclaim_after
	StatusSent       Status = "SENT"       // a handler returned nil
	StatusFailed     Status = "FAILED"     // permanent error, attempts exhausted or undecodable
)

// TypeCounts are the numbers of one event type, or of the whole table in Snapshot. SENT rows
// are never counted, since that part of the table grows without bound.
type TypeCounts struct {
	// Pending rows, due or not.
	Pending int64
	// Due counts pending rows whose next_attempt_at has passed and that can be claimed now. An
	// ordered message waiting behind its key's head is pending, not due.
	Due int64
	// Processing counts claimed rows.
	Processing int64
	// Stale counts processing rows whose lease, reclaim_after, has passed. The next reclaim
	// takes them.
	Stale int64
	// Stuck counts processing rows claimed more than three leases ago. Nobody is reclaiming
	// them. Anything above zero needs a person.
	Stuck int64
	// Failed rows, waiting for Retry or Purge.
	Failed int64
	// Cancelled rows, which an operator cancelled and Purge deletes.
	Cancelled int64
	// OldestPending is the age of the oldest pending row by created_at, on the database clock.
	// It is 0 when none is pending. It includes rows delayed or backed off into the future.
	OldestPending time.Duration
	// OldestDue is how long the longest-waiting due row has been claimable, since its
	// next_attempt_at. It is 0 when none is due. With a live worker it stays near PollInterval,
	// or more under a backlog. When it keeps growing, nobody is claiming.
	OldestDue time.Duration
	// Held is how many held ordering keys have a head message of this event type. A key
	// belongs to its ordering group, which can span several event types. Held therefore counts
	// keys by the type of the message holding them, not of the messages waiting behind it. Over
	// all types these add up to Snapshot.HeldKeys.
	Held int64
	// Retrying counts pending rows that failed at least once and wait for a retry.
	Retrying int64
	// Failing says the type's handlers keep failing, as the table shows it to every process:
	// 5 or more rows are retrying and none of the type was sent in the last 30 seconds. It
	// shows a provider outage long before the first FAILED. Each worker's own circuit, in its
	// memory, decides its claims.
	Failing bool
}

// Snapshot is what Stats returns, the totals and the same counts per event type.
type Snapshot struct {
	Pending, Due, Processing, Stale, Stuck, Failed int64
	// Cancelled counts the CANCELLED rows, kept until Purge.
	Cancelled int64
	// OldestPending and OldestDue are the largest over all types.
	OldestPending, OldestDue time.Duration
	// ByType holds the counts of every event type that has a pending, processing or failed
	// row. A held key's head is such a row.
	ByType map[string]TypeCounts
	// HeldKeys is how many ordering keys are held. A held key's head message cannot be claimed
	// now while other messages of the key wait behind it. The head is FAILED, or PENDING until
	// a later time set by a retry's backoff or a Delay. A FAILED head holds its key until Retry
	// or Purge.
	HeldKeys int64
	// OldestHeld is how long the longest-held key's first waiting message has waited since its
	// enqueue. It is 0 when no key is held.
	OldestHeld time.Duration
	// Held lists up to MaxHeldListed held keys, the longest held first.
	Held []HeldKey
	// BrokenKeys is how many ordering keys are broken. A broken key is stalled by a row the
	// runtime never leaves, which no claim or retry would ever move. BrokenReason lists the
	// kinds. Workers' maintenance repairs them, and until then a person should know. Anything
	// above zero is wrong.
	BrokenKeys int64
	// Broken lists up to MaxHeldListed of them, broken heads first, then unqueued messages.
	Broken []BrokenKey
	// Failing lists the event types whose TypeCounts.Failing is set, in order.
	Failing []string
	// OldestSent is how long ago the oldest SENT row still in the table was sent (to within
	// its delivery lag), 0 when there is none. With retention on it stays near
	// Config.Retention.Sent; far above it, no worker of that row's type is cleaning.
	OldestSent time.Duration
}

// MaxHeldListed bounds Snapshot.Held and Snapshot.Broken. HeldKeys and BrokenKeys count them
// all.
const MaxHeldListed = 100

// Stats counts the table's PENDING, PROCESSING, FAILED and CANCELLED rows by event type. Due-now, stale
// and stuck come from each row's own lease, so Stats needs no worker configuration. Any
// process, and `outboxgen status`, therefore sees the same numbers. The counts are one query,
// on the database clock.
func Stats(ctx context.Context, db DBTX) (Snapshot, error) {
	rows, err := q.MessageStatsByType(ctx, sdb(db))
	if err != nil {
		return Snapshot{}, fmt.Errorf("outbox: Stats: %w", explain(err))
	}
	s := Snapshot{ByType: make(map[string]TypeCounts, len(rows))}
	for _, r := range rows {
		tc := TypeCounts{
			Pending: r.Pending, Due: r.Due, Processing: r.Processing, Stale: r.Stale,
			Stuck: r.Stuck, Failed: r.Failed, Cancelled: r.Cancelled, OldestPending: durationFromMicros(r.OldestPendingUs),
			OldestDue: durationFromMicros(r.OldestDueUs),
		}
		s.ByType[r.EventType] = tc
		s.Pending += tc.Pending
		s.Due += tc.Due
		s.Processing += tc.Processing
		s.Stale += tc.Stale
		s.Stuck += tc.Stuck
		s.Failed += tc.Failed
		s.Cancelled += tc.Cancelled
		s.OldestPending = max(s.OldestPending, tc.OldestPending)
		s.OldestDue = max(s.OldestDue, tc.OldestDue)
	}
	if err := s.addHeldKeys(ctx, db); err != nil {
		return Snapshot{}, fmt.Errorf("outbox: Stats: held keys: %w", explain(err))
	}
	if err := s.addFailing(ctx, db); err != nil {
		return Snapshot{}, fmt.Errorf("outbox: Stats: failing types: %w", explain(err))
	}
	if s.BrokenKeys, s.Broken, err = brokenKeys(ctx, db); err != nil {
		return Snapshot{}, fmt.Errorf("outbox: Stats: broken keys: %w", explain(err))
	}
	sentUs, err := oldestSent(ctx, db)
	if err != nil {
		return Snapshot{}, fmt.Errorf("outbox: Stats: oldest SENT: %w", explain(err))
	}
	s.OldestSent = durationFromMicros(sentUs)
	return s, nil
}
