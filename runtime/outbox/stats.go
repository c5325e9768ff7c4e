package outbox

import (
	"context"
	"fmt"
	"time"
)

// Status is a row's state in outbox_messages.
type Status string

// The four states of a message.
const (
	StatusPending    Status = "PENDING"    // waiting for next_attempt_at, then claimable
	StatusProcessing Status = "PROCESSING" // claimed; its lease ends at reclaim_after
	StatusSent       Status = "SENT"       // a handler returned nil
	StatusFailed     Status = "FAILED"     // permanent error, attempts exhausted or undecodable
)

// TypeCounts are the numbers of one event type (or of the whole table, in Snapshot). SENT rows
// are never counted: that part of the table grows without bound.
type TypeCounts struct {
	// Pending rows, due or not.
	Pending int64
	// Due: pending rows whose next_attempt_at has passed and that can be claimed now (an ordered
	// message waiting behind its key's head is pending, not due).
	Due int64
	// Processing: claimed rows.
	Processing int64
	// Stale: processing rows whose lease (reclaim_after) has passed; the next reclaim takes them.
	Stale int64
	// Stuck: processing rows older than 3x their lease (now - claimed_at > 3 x (reclaim_after -
	// claimed_at)): nobody is reclaiming them. Anything above zero needs a person.
	Stuck int64
	// Failed rows, waiting for Retry or Purge.
	Failed int64
	// OldestPending is the age (database clock) of the oldest pending row, by created_at; 0 when
	// none is pending. It includes rows delayed or backed off into the future.
	OldestPending time.Duration
	// OldestDue is how long the longest-waiting due row has been claimable (now -
	// next_attempt_at); 0 when none is due. With a live worker it stays near PollInterval (more
	// under a backlog); when it grows, nobody is claiming.
	OldestDue time.Duration
	// Held is how many held ordering keys (Snapshot.HeldKeys) have a head message of this event
	// type. A key belongs to its ordering group, which can span several event types, so this
	// counts keys by the type of the message holding them, not of the messages waiting behind
	// it. Over all types these add up to Snapshot.HeldKeys.
	Held int64
}

// Snapshot is what Stats returns: the totals and the same counts per event type.
type Snapshot struct {
	Pending, Due, Processing, Stale, Stuck, Failed int64
	// OldestPending and OldestDue are the largest over all types.
	OldestPending, OldestDue time.Duration
	// ByType holds the counts of every event type that has a pending, processing or failed row
	// (a held key's head is one of them).
	ByType map[string]TypeCounts
	// HeldKeys is how many ordering keys are held: their head message cannot be claimed now
	// (FAILED, or PENDING until a later time: a retry's backoff, a Delay) while other messages
	// of the key wait behind it. A FAILED head holds its key until Retry or Purge.
	HeldKeys int64
	// OldestHeld is how long the longest-held key's first waiting message has waited since it
	// was enqueued; 0 when no key is held.
	OldestHeld time.Duration
	// Held lists up to MaxHeldListed held keys, the longest held first.
	Held []HeldKey
	// BrokenKeys is how many ordering keys are broken: stalled by a row the runtime never
	// leaves (a head entry whose message is missing, SENT or not the entry's, or an ordered
	// PENDING message without its entry), which no claim or retry would ever move. Workers'
	// maintenance repairs them; until then a person should know. Anything above zero is wrong.
	BrokenKeys int64
	// Broken lists up to MaxHeldListed of them (broken heads first, then unqueued messages).
	Broken []BrokenKey
}

// MaxHeldListed bounds Snapshot.Held (HeldKeys counts them all) and Snapshot.Broken.
const MaxHeldListed = 100

// Stats counts the table's PENDING, PROCESSING and FAILED rows by event type. Due-now, stale
// and stuck come from each row's own lease, so Stats needs no worker configuration. Any process
// (or `outboxgen status`) therefore sees the same numbers. The counts are one query, on the
// database clock.
func Stats(ctx context.Context, db DBTX) (Snapshot, error) {
	rows, err := q.MessageStatsByType(ctx, sdb(db))
	if err != nil {
		return Snapshot{}, fmt.Errorf("outbox: Stats: %w", explain(err))
	}
	s := Snapshot{ByType: make(map[string]TypeCounts, len(rows))}
	for _, r := range rows {
		tc := TypeCounts{
			Pending: r.Pending, Due: r.Due, Processing: r.Processing, Stale: r.Stale,
			Stuck: r.Stuck, Failed: r.Failed, OldestPending: durationFromMicros(r.OldestPendingUs),
			OldestDue: durationFromMicros(r.OldestDueUs),
		}
		s.ByType[r.EventType] = tc
		s.Pending += tc.Pending
		s.Due += tc.Due
		s.Processing += tc.Processing
		s.Stale += tc.Stale
		s.Stuck += tc.Stuck
		s.Failed += tc.Failed
		s.OldestPending = max(s.OldestPending, tc.OldestPending)
		s.OldestDue = max(s.OldestDue, tc.OldestDue)
	}
	if err := s.addHeldKeys(ctx, db); err != nil {
		return Snapshot{}, fmt.Errorf("outbox: Stats: held keys: %w", explain(err))
	}
	if s.BrokenKeys, s.Broken, err = brokenKeys(ctx, db); err != nil {
		return Snapshot{}, fmt.Errorf("outbox: Stats: broken keys: %w", explain(err))
	}
	return s, nil
}
