package outbox_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// TestSendDirect: retries until success, stops at a permanent error or the attempt budget,
// and gives the handler the event's type, key and attempt number.
func TestSendDirect(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	t.Run("retries until success", func(t *testing.T) {
		t.Parallel()
		var seen []outbox.Delivery
		err := outbox.SendDirect(context.Background(), outbox.Policy{MaxAttempts: 5}, "ops_alert", "ops_alert:1:x", func(ctx context.Context, d outbox.Delivery) error {
			seen = append(seen, d)
			if d.Attempt < 2 {
				return boom
			}
			return nil
		})
		if err != nil {
			t.Fatalf("SendDirect: %v, want nil after the second attempt succeeded", err)
		}
		if len(seen) != 2 || seen[1].Attempt != 2 || seen[0].EventType != "ops_alert" || seen[0].IdempotencyKey != "ops_alert:1:x" || seen[0].EnqueuedAt.Location() != time.UTC {
			t.Fatalf("deliveries %+v, want attempts 1 and 2 of ops_alert with its key, in UTC", seen)
		}
	})
	t.Run("budget spent", func(t *testing.T) {
		t.Parallel()
		calls := 0
		err := outbox.SendDirect(context.Background(), outbox.Policy{MaxAttempts: 2}, "ops_alert", "", func(context.Context, outbox.Delivery) error {
			calls++
			return boom
		})
		if calls != 2 || !errors.Is(err, boom) || err.Error() != "ops_alert: direct send: attempt 1: boom\nattempt 2: boom" {
			t.Fatalf("%d calls, error %q; want 2 calls and both attempts' errors", calls, err)
		}
	})
	t.Run("default attempts", func(t *testing.T) {
		t.Parallel()
		calls := 0
		_ = outbox.SendDirect(context.Background(), outbox.Policy{}, "ops_alert", "", func(context.Context, outbox.Delivery) error {
			calls++
			return boom
		})
		if calls != 3 {
			t.Fatalf("%d calls with MaxAttempts unset, want 3", calls)
		}
	})
	t.Run("permanent", func(t *testing.T) {
		t.Parallel()
		calls := 0
		err := outbox.SendDirect(context.Background(), outbox.Policy{MaxAttempts: 5}, "ops_alert", "", func(context.Context, outbox.Delivery) error {
			calls++
			return outbox.Permanent(boom)
		})
		if calls != 1 || !outbox.IsPermanent(err) {
			t.Fatalf("%d calls, error %v; want one call and the permanent error", calls, err)
		}
	})
	t.Run("context ends", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		err := outbox.SendDirect(ctx, outbox.Policy{MaxAttempts: 5}, "ops_alert", "", func(context.Context, outbox.Delivery) error {
			cancel() // ends the wait before the second attempt
			return boom
		})
		if !errors.Is(err, context.Canceled) || !errors.Is(err, boom) || !strings.HasPrefix(err.Error(), "ops_alert: direct send: attempt 1: boom") {
			t.Fatalf("error %q; want the first attempt's error and context.Canceled", err)
		}
	})
}
