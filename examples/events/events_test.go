package events_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/examples/events"
	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// The generated code of the repository's own catalog, as an application uses it. Validate,
// the wire format and SendX need no database; the tests in the other files use one from
// outboxtest.Open (OUTBOX_TEST_DSN, else they are skipped).

func TestPaymentFailedWireFormat(t *testing.T) {
	kst := time.FixedZone("KST", 9*3600)
	e := events.PaymentFailed{
		SubscriptionID: 7, InvoiceID: "inv-1",
		Amount:   events.Money{Amount: 1250, Currency: events.MoneyCurrencyUSD},
		FailedAt: time.Date(2026, 3, 1, 9, 0, 0, 120000000, kst),
		Reasons:  []string{"card_declined"},
	}
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"subscription_id":7,"invoice_id":"inv-1","amount":{"amount":1250,"currency":"USD"},"failed_at":"2026-03-01T00:00:00.12Z","reasons":["card_declined"]}`
	if string(b) != want {
		t.Fatalf("wire format changed (stored rows depend on it):\n got %s\nwant %s", b, want)
	}
	if got := e.IdempotencyKey(); got != "payment_failed:5:inv-1" {
		t.Fatalf("IdempotencyKey() = %q, want payment_failed:5:inv-1 (keys are stored: the format must not drift)", got)
	}
	if got := (events.WelcomeEmail{CompanyID: 42}).IdempotencyKey(); got != "welcome_email:2:42" {
		t.Fatalf("WelcomeEmail key = %q", got)
	}
}

func TestEnqueueValidatesBeforeTouchingTheTransaction(t *testing.T) {
	bad := events.PaymentFailed{InvoiceID: "", Amount: events.Money{Currency: "XYZ"}}
	// A nil DBTX: Validate must fail first, so the transaction is never used.
	_, err := events.EnqueuePaymentFailed(context.Background(), nil, bad)
	if err == nil {
		t.Fatal("an invalid payload was accepted")
	}
	for _, want := range []string{"payment_failed: invoice_id is empty", `payment_failed: amount: currency: invalid MoneyCurrency "XYZ" (want KRW, USD or EUR)`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

// Enqueue validates strings as UTF-8 (encoding/json would store U+FFFD instead of the bytes
// given, silently), inside lists and nested types too, before touching the transaction.
func TestEnqueueRefusesInvalidUTF8(t *testing.T) {
	bad := events.PaymentFailed{
		SubscriptionID: 7, InvoiceID: "inv-\xff",
		Amount:  events.Money{Amount: 1, Currency: events.MoneyCurrencyUSD},
		Reasons: []string{"card_declined", "caf\xe9"},
	}
	_, err := events.EnqueuePaymentFailed(context.Background(), nil, bad)
	if err == nil {
		t.Fatal("a payload with invalid UTF-8 was accepted")
	}
	for _, want := range []string{"payment_failed: invoice_id is not valid UTF-8", "payment_failed: reasons[1] is not valid UTF-8"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	plan := "pro\xc3"
	if err := (events.WelcomeEmail{CompanyID: 1, Email: "a@b.c", Plan: &plan}).Validate(); err == nil || err.Error() != "welcome_email: plan is not valid UTF-8" {
		t.Errorf("WelcomeEmail.Validate with an invalid optional string: %v", err)
	}
	if err := (events.OpsDBWriteFailed{Operation: "é", Detail: "\x80"}).Validate(); err == nil || err.Error() != "ops_db_write_failed: detail is not valid UTF-8" {
		t.Errorf("OpsDBWriteFailed.Validate: %v", err)
	}
}

type alertFunc func(ctx context.Context, e events.OpsDBWriteFailed, d outbox.Delivery) error

func (f alertFunc) HandleOpsDBWriteFailed(ctx context.Context, e events.OpsDBWriteFailed, d outbox.Delivery) error {
	return f(ctx, e, d)
}

func TestSendDirectRetriesWithinBounds(t *testing.T) {
	ctx := context.Background()
	alert := events.OpsDBWriteFailed{Operation: "charge", Detail: "commit failed"}

	t.Run("retries until success", func(t *testing.T) {
		t.Parallel()
		var attempts []int
		err := events.SendOpsDBWriteFailed(ctx, alertFunc(func(_ context.Context, e events.OpsDBWriteFailed, d outbox.Delivery) error {
			attempts = append(attempts, d.Attempt)
			if e != alert || d.EventType != "ops_db_write_failed" {
				t.Errorf("handler got %+v %+v", e, d)
			}
			if d.Attempt < 3 {
				return errors.New("pager busy")
			}
			return nil
		}), alert)
		if err != nil || len(attempts) != 3 {
			t.Fatalf("err %v after attempts %v; want success on the third", err, attempts)
		}
	})
	t.Run("stops at max_attempts", func(t *testing.T) {
		t.Parallel()
		calls := 0
		start := time.Now()
		err := events.SendOpsDBWriteFailed(ctx, alertFunc(func(context.Context, events.OpsDBWriteFailed, outbox.Delivery) error {
			calls++
			return errors.New("down")
		}), alert)
		// events.yaml: defaults max_attempts 10 applies to the direct event; waits are 100ms,
		// 200ms, 400ms, 800ms, then 1s: about 6.5s in all, far from the outbox's hour.
		if err == nil || calls != 10 || !strings.Contains(err.Error(), "attempt 10: down") {
			t.Fatalf("calls %d, err %v; want 10 calls and every attempt's error", calls, err)
		}
		if took := time.Since(start); took > 20*time.Second {
			t.Fatalf("10 attempts took %v; the direct backoff must stay small", took)
		}
	})
	t.Run("permanent error is not retried", func(t *testing.T) {
		t.Parallel()
		calls := 0
		err := events.SendOpsDBWriteFailed(ctx, alertFunc(func(context.Context, events.OpsDBWriteFailed, outbox.Delivery) error {
			calls++
			return outbox.Permanent(errors.New("bad address"))
		}), alert)
		if calls != 1 || !outbox.IsPermanent(err) {
			t.Fatalf("calls %d, err %v; want one call and the permanent error", calls, err)
		}
	})
	t.Run("bounded by ctx", func(t *testing.T) {
		t.Parallel()
		cctx, cancel := context.WithTimeout(ctx, 250*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := events.SendOpsDBWriteFailed(cctx, alertFunc(func(context.Context, events.OpsDBWriteFailed, outbox.Delivery) error {
			return errors.New("down")
		}), alert)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err %v; want it to end with the context's deadline", err)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Fatalf("SendX ran %v past a 250ms context", took)
		}
	})
}

// An order's three events share the ordering group "orders": equal order ids give one key,
// whichever event carries it, so the order's events are handled in commit order together.
func TestOrderingKeys(t *testing.T) {
	placed := events.OrderPlaced{OrderID: 42, CustomerEmail: "a@example.com", Total: events.Money{Amount: 990, Currency: events.MoneyCurrencyEUR}}
	paid := events.OrderPaid{OrderID: 42, PaymentID: "pay-1", Amount: placed.Total}
	shipped := events.OrderShipped{OrderID: 42, Carrier: events.OrderShippedCarrierDhl, TrackingNumber: "JD0001"}
	for _, k := range []string{placed.OrderingKey(), paid.OrderingKey(), shipped.OrderingKey()} {
		if k != "orders:2:42" {
			t.Fatalf("ordering key %q, want orders:2:42 for every event of order 42 (keys are stored: the format must not drift)", k)
		}
	}
	if k := (events.OrderPaid{OrderID: 4, PaymentID: "pay-2"}).OrderingKey(); k != "orders:1:4" {
		t.Errorf("order 4's key = %q, want orders:1:4", k)
	}
	// The idempotency keys stay per event: a payment and its order are different logical events.
	if placed.IdempotencyKey() != "order_placed:2:42" || paid.IdempotencyKey() != "order_paid:5:pay-1" {
		t.Errorf("idempotency keys %q and %q", placed.IdempotencyKey(), paid.IdempotencyKey())
	}
	if _, err := events.EnqueueOrderPaid(context.Background(), nil, events.OrderPaid{OrderID: 42, Amount: placed.Total}); err == nil || !strings.Contains(err.Error(), "order_paid: payment_id is empty; it is part of the idempotency key") {
		t.Errorf("an order_paid without its payment id: %v", err)
	}
}
