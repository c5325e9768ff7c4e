// The expiry of the keys Once records. A key must outlive every delivery of its message that
// could still come, or a redelivery after the key's deletion would repeat the effects. So a
// key's expiry is its processed_at plus max(Retention.Inbox, the redelivery window of its
// handler's policy), and the cleaner deletes only expired keys.

package outbox

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"
)

// DefaultRetentionInbox is the least time a key Once records is kept when Retention.Inbox is
// zero. A handler whose redelivery window is longer keeps its keys for that window instead.
const DefaultRetentionInbox = 7 * 24 * time.Hour

// redeliveryWindow is the longest time from a message's first claim to the end of its last
// possible attempt under policy p (with defaults) on a worker configured as c (with defaults).
// A key Once records in any attempt is safe for that long after it was recorded.
//
//   - An attempt holds its row at most c.StaleAfter (the lease, which the handler's Timeout is
//     shorter than, result write included) plus c.ReclaimInterval (until a reclaim finds the
//     expired lease). A result written after the reclaim is refused by the fence. A reclaim
//     counts as an attempt and makes the row due at once; a failed attempt waits its backoff.
//   - There are p.MaxAttempts attempts and MaxAttempts-1 waits between them. The n-th wait is at
//     most its backoff's top, min(1.5 x Initial x 2^(n-1), Max), plus c.PollInterval, the
//     longest an idle worker takes to claim a row that came due.
//
// It does not cover what the policy does not decide: a delay a handler asks with RetryAfter
// beyond its backoff, a backlog, a pause or an open circuit that keeps a due row waiting, a
// give-back at shutdown (not an attempt), an operator's Retry, or a second message enqueued
// with the same idempotency key later. Retention.Inbox, at least DefaultRetentionInbox when
// left zero, is the margin for those. The result saturates at the largest time.Duration.
func redeliveryWindow(p Policy, c Config) time.Duration {
	attempts := int64(max(p.MaxAttempts, 1))
	total := mulSat(satAdd(c.StaleAfter, c.ReclaimInterval), attempts)
	b := p.Backoff
	for n := int64(1); n < attempts; n++ {
		top := b.Max
		if n <= 62 {
			if f := 1.5 * float64(b.Initial) * math.Pow(2, float64(n-1)); f < float64(b.Max) {
				top = time.Duration(f)
			}
		}
		if top == b.Max {
			// Every later wait is at its Max too.
			return satAdd(total, mulSat(satAdd(b.Max, c.PollInterval), attempts-n))
		}
		total = satAdd(total, satAdd(top, c.PollInterval))
	}
	return total
}

// inboxExpiry is how long after processed_at the keys a handler of p records are kept, and an
// error naming Retention.Inbox and the window when an explicit Inbox is shorter than the window.
// KeepForever keeps them.
func inboxExpiry(eventType string, p Policy, c Config) (time.Duration, error) {
	window := redeliveryWindow(p, c)
	switch inbox := c.Retention.Inbox; {
	case keeps(inbox):
		return KeepForever, nil
	case inbox == 0:
		return max(DefaultRetentionInbox, window), nil
	case inbox < window:
		return 0, fmt.Errorf("event %q: Config.Retention.Inbox %s is shorter than the redelivery window %s of its policy (MaxAttempts %d, Backoff %s..%s, Config.StaleAfter %s): a key Once recorded could be deleted while its message may still be delivered again; raise Retention.Inbox to at least the window, or leave it 0 for max(%s, the window)",
			eventType, inbox, window, p.MaxAttempts, p.Backoff.Initial, p.Backoff.Max, c.StaleAfter, DefaultRetentionInbox)
	default:
		return inbox, nil
	}
}

// setInboxExpiry gives every route's handler a ctx that carries its keys' expiry, for Once. It
// runs in NewWorker after the middleware is wrapped, so the middleware sees it too.
func (r *Router) setInboxExpiry(c Config) error {
	for t, rt := range r.routes {
		keep, err := inboxExpiry(t, rt.policy, c)
		if err != nil {
			return err
		}
		h := rt.handler
		rt.handler = func(ctx context.Context, payload json.RawMessage, d Delivery) error {
			return h(context.WithValue(ctx, inboxExpiryKey{}, keep), payload, d)
		}
		r.routes[t] = rt
	}
	return nil
}

// inboxExpiryKey is the ctx key of a handler's key expiry.
type inboxExpiryKey struct{}

// inboxExpiryOf is the expiry of the keys Once records under ctx: the handler's, or
// DefaultRetentionInbox outside a worker's handler.
func inboxExpiryOf(ctx context.Context) time.Duration {
	if d, ok := ctx.Value(inboxExpiryKey{}).(time.Duration); ok {
		return d
	}
	return DefaultRetentionInbox
}

// satAdd adds two non-negative durations, saturating at the largest time.Duration.
func satAdd(a, b time.Duration) time.Duration {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// mulSat multiplies a non-negative duration by n >= 0, saturating at the largest time.Duration.
func mulSat(d time.Duration, n int64) time.Duration {
	if n != 0 && d > math.MaxInt64/time.Duration(n) {
		return math.MaxInt64
	}
	return d * time.Duration(n)
}

// inboxKeepUs is InboxInsert's keep_us under ctx: the expiry in microseconds, -1 to keep the
// key forever.
func inboxKeepUs(ctx context.Context) int64 {
	d := inboxExpiryOf(ctx)
	if keeps(d) {
		return -1
	}
	return d.Microseconds()
}
