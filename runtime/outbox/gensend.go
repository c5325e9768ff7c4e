package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// SendDirect runs a direct event's handler in-process (generated code support: see the package
// documentation): it calls fn until it succeeds, up to p.MaxAttempts times (3 when unset),
// within ctx and p.Timeout (DefaultTimeout when unset), waiting 100ms, 200ms, ... up to 1s
// between attempts: a direct event never waits on the outbox's long backoff, and never touches
// the database. An error marked Permanent is not retried. It returns nil on the first success,
// else every attempt's error joined, under "<eventType>: direct send: ".
func SendDirect(ctx context.Context, p Policy, eventType, key string, fn func(context.Context, Delivery) error) error {
	attempts := p.MaxAttempts
	if attempts <= 0 {
		attempts = 3
	}
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	d := Delivery{EventType: eventType, IdempotencyKey: key, EnqueuedAt: time.Now().UTC()}
	wait := 100 * time.Millisecond
	var errs []error
	for d.Attempt = 1; d.Attempt <= attempts; d.Attempt++ {
		err := fn(ctx, d)
		if err == nil {
			return nil
		}
		errs = append(errs, fmt.Errorf("attempt %d: %w", d.Attempt, err))
		if IsPermanent(err) || d.Attempt == attempts {
			break
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%s: direct send: %w", eventType, errors.Join(append(errs, ctx.Err())...))
		case <-t.C:
		}
		wait = min(2*wait, time.Second)
	}
	return fmt.Errorf("%s: direct send: %w", eventType, errors.Join(errs...))
}
