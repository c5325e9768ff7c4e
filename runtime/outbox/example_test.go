package outbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// Generated code registers typed handlers with the catalog's policy; Handle is the untyped
// primitive underneath. Zero policy fields take the built-in defaults.
func ExampleRouter_Handle() {
	r := outbox.NewRouter()
	r.Handle("welcome_email", outbox.Policy{}, func(ctx context.Context, payload json.RawMessage, d outbox.Delivery) error {
		return nil
	})
	r.Handle("payment_failed", outbox.Policy{MaxAttempts: 12, Timeout: 30 * time.Second},
		func(ctx context.Context, payload json.RawMessage, d outbox.Delivery) error {
			return nil
		})

	// A worker on this router claims only these event types.
	fmt.Println(r.EventTypes())
	p, _ := r.Policy("payment_failed")
	fmt.Printf("payment_failed: max_attempts=%d backoff=%s..%s timeout=%s\n",
		p.MaxAttempts, p.Backoff.Initial, p.Backoff.Max, p.Timeout)
	// Output:
	// [payment_failed welcome_email]
	// payment_failed: max_attempts=12 backoff=1s..1h0m0s timeout=30s
}

// The policy resolution's last step: whatever the catalog left unset.
func ExamplePolicy_WithDefaults() {
	p := outbox.Policy{Backoff: outbox.Backoff{Initial: 5 * time.Second}}.WithDefaults()
	fmt.Println(p.MaxAttempts, p.Backoff.Initial, p.Backoff.Max, p.Timeout)
	// Output:
	// 10 5s 1h0m0s 1m0s
}
