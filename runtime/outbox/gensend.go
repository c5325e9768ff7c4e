package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// SendDirect runs a direct event's handler in-process, for generated code. It calls fn until it
// succeeds, up to p.MaxAttempts times, or 3 when unset. It runs within ctx and p.Timeout, or
// DefaultTimeout when unset. Between attempts it waits 100ms, then twice as long each time, up
// to 1s. A direct event thus never waits on the outbox's long backoff, and never touches the
// database. An error marked Permanent is not retried. It returns nil on the first success.
// Otherwise it returns every attempt's error joined, prefixed by the event type and "direct
// send".
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
