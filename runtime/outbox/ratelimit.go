// Rate limits per event type, fleet-wide. A limit is a token bucket in outbox_rate_limits,
// one row per type, so every worker on the table draws from the same tokens. A claim of a
// limited type locks its bucket inside the claim's own transaction, refills it on the database
// clock, claims at most the whole tokens there are and writes back what is left. Tokens are
// thus taken only for rows claimed: none is lost and none is returned.

package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/outboxgen/outboxgen/runtime/internal/store"
)

// Rate is a rate limit: at most N messages per Per, with bursts of up to N after a quiet
// spell. The zero Rate means no limit.
type Rate struct {
	N   int
	Per time.Duration
}

// IsZero says r sets no limit.
func (r Rate) IsZero() bool { return r == Rate{} }

// String writes r as events.yaml does, "50/s" or "3/m", as N per Per otherwise, and the zero
// Rate as "none".
func (r Rate) String() string {
	if r.IsZero() {
		return "none"
	}
	switch r.Per {
	case time.Second:
		return fmt.Sprintf("%d/s", r.N)
	case time.Minute:
		return fmt.Sprintf("%d/m", r.N)
	}
	return fmt.Sprintf("%d per %s", r.N, r.Per)
}

// Bounds of a Rate, which keep the bucket's arithmetic exact and its periods meaningful.
const (
	maxRateN   = 1_000_000
	minRatePer = time.Millisecond
	maxRatePer = 24 * time.Hour
)

// rateProblem says what is wrong with r, or "" when nothing is.
func rateProblem(r Rate) string {
	if r.IsZero() {
		return ""
	}
	if r.N < 1 || r.N > maxRateN {
		return fmt.Sprintf("RateLimit.N %d is not in 1..%d", r.N, maxRateN)
	}
	if r.Per < minRatePer || r.Per > maxRatePer {
		return fmt.Sprintf("RateLimit.Per %s is not in %s..%s", r.Per, minRatePer, maxRatePer)
	}
	return ""
}

// probeRateLimits checks that the buckets' table exists when some type of r is rate-limited.
// Without it every claim of the type would fail, and the error would come once a poll.
func probeRateLimits(ctx context.Context, db store.DBTX, r *Router) error {
	for _, t := range r.EventTypes() {
		if rt, _ := r.lookup(t); !rt.policy.RateLimit.IsZero() {
			if _, err := q.RateLimitProbe(ctx, db); err != nil {
				return explain(err)
			}
			return nil
		}
	}
	return nil
}

// rateGate is the claimGate of one rate-limited type. It lives for one claim.
type rateGate struct {
	eventType string
	rate      Rate
	tokens    float64 // in the bucket after the refill, before the claim
	elapsedUs int64   // the refill's time, by which refilled_at moves
	admitted  int
}

// admit locks the type's bucket, refills it and lowers n to the whole tokens in it. A type
// with no bucket yet gets an empty one, so its first claim admits nothing.
func (g *rateGate) admit(ctx context.Context, db store.DBTX, n int) (int, error) {
	row, err := q.RateLimitLock(ctx, db, g.eventType)
	if errors.Is(err, sql.ErrNoRows) {
		if err := q.RateLimitCreate(ctx, db, g.eventType); err != nil {
			return 0, fmt.Errorf("rate limit of %q: create bucket: %w", g.eventType, err)
		}
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("rate limit of %q: %w", g.eventType, err)
	}
	// A database clock that stepped back refills nothing and leaves refilled_at where it is.
	g.elapsedUs = max(row.ElapsedUs, 0)
	g.tokens = refill(row.Tokens, g.elapsedUs, g.rate)
	g.admitted = min(n, int(math.Floor(g.tokens)))
	return g.admitted, nil
}

// took writes the bucket back less the tokens used. When the claim took nothing the bucket is
// left as it was: a refill computed later from the same refilled_at comes to the same tokens.
func (g *rateGate) took(ctx context.Context, db store.DBTX, got int) error {
	if got == 0 {
		return nil
	}
	_, err := q.RateLimitTake(ctx, db, store.RateLimitTakeParams{
		Capacity: int64(g.rate.N), ElapsedUs: g.elapsedUs, PerUs: g.rate.Per.Microseconds(), Used: int64(got), EventType: g.eventType,
	})
	if err != nil {
		return fmt.Errorf("rate limit of %q: take %d: %w", g.eventType, got, err)
	}
	g.tokens -= float64(got)
	return nil
}

// refill is RateLimitTake's arithmetic before the tokens used: the bucket after elapsedUs, up
// to its capacity.
func refill(tokens float64, elapsedUs int64, r Rate) float64 {
	return max(0, min(float64(r.N), tokens+1e0*float64(elapsedUs)*float64(r.N)/float64(r.Per.Microseconds())))
}

// untilTokens is how long the bucket takes to hold want whole tokens after it held have.
func untilTokens(have float64, want int, r Rate) time.Duration {
	missing := float64(want) - have
	if missing <= 0 {
		return 0
	}
	return time.Duration(missing * float64(r.Per) / float64(r.N))
}
