// Held ordering keys, whose head message cannot be claimed now, as Stats reports them.

package outbox

import (
	"context"
	"math"
	"time"
)

// HeldKey is one held ordering key in Snapshot.Held.
type HeldKey struct {
	// OrderingKey is the key, prefixed by its group as generated code builds it.
	OrderingKey string
	// Head is the message holding the key. HeadStatus is its status, FAILED or PENDING.
	// HeadEventType is its event type, since the key's group can span several types.
	Head          MessageID
	HeadStatus    Status
	HeadEventType string
	// Waiting is how many messages of the key wait behind the head.
	Waiting int64
	// For is how long the first of them has waited since it was enqueued.
	For time.Duration
}

// addHeldKeys adds the held ordering keys to s. It sets HeldKeys and OldestHeld, counts each
// head's type's Held, and lists up to MaxHeldListed entries in Held.
func (s *Snapshot) addHeldKeys(ctx context.Context, db DBTX) error {
	held, err := q.OrderingHeldKeys(ctx, sdb(db), math.MaxInt32)
	if err != nil {
		return err
	}
	s.HeldKeys = int64(len(held))
	for i, h := range held {
		d := durationFromMicros(h.HeldUs)
		s.OldestHeld = max(s.OldestHeld, d)
		// The head is PENDING or FAILED, so its type has a ByType entry. It has none when the
		// head was enqueued between the two queries. The entry then holds this count alone.
		tc := s.ByType[h.HeadEventType]
		tc.Held++
		s.ByType[h.HeadEventType] = tc
		if i < MaxHeldListed {
			s.Held = append(s.Held, HeldKey{OrderingKey: h.OrderingKey, Head: MessageID(h.HeadID),
				HeadStatus: Status(h.HeadStatus), HeadEventType: h.HeadEventType, Waiting: h.Waiting, For: d})
		}
	}
	return nil
}
