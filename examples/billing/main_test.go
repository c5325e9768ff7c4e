package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/examples/events"
	"github.com/outboxgen/outboxgen/runtime/outbox"
	"github.com/outboxgen/outboxgen/runtime/outboxtest"
)

func TestBillingDuplicateDeliveryHasOneEffect(t *testing.T) {
	// run is the program itself, its worker included: what it prints is checked too.
	db := outboxtest.Open(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	var out bytes.Buffer
	if err := run(ctx, db, &out); err != nil {
		t.Fatalf("run: %v\noutput:\n%s", err, out.String())
	}
	t.Logf("output:\n%s", out.String())

	count := func(q string) int {
		t.Helper()
		var n int
		if err := db.QueryRow(q).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}
	// Two messages (the webhook came twice), both SENT: Stats counts every message that is not.
	s, err := outbox.Stats(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(outboxtest.Enqueued[events.PaymentFailed](t, db)); n != 2 || s.Pending+s.Processing+s.Failed != 0 {
		t.Errorf("payment_failed messages = %d, %d not SENT; want 2, both SENT", n, s.Pending+s.Processing+s.Failed)
	}
	// Three deliveries in all (one retried); the kit reads no attempts.
	if n := count("SELECT COALESCE(SUM(attempts), 0) FROM outbox_messages"); n != 3 {
		t.Errorf("attempts in all = %d, want 3 (one message delivered twice)", n)
	}
	if n := strings.Count(out.String(), "handler: message"); n != 3 {
		t.Errorf("handler calls = %d, want 3", n)
	}
	// One effect.
	if n := count("SELECT COUNT(*) FROM dunning_notices WHERE invoice_id = 'inv-2026-0042' AND amount = 4900 AND currency = 'USD'"); n != 1 {
		t.Errorf("dunning notices = %d, want exactly 1", n)
	}
	if n := count("SELECT COUNT(*) FROM outbox_inbox WHERE consumer = 'billing.dunning'"); n != 1 {
		t.Errorf("inbox keys = %d, want 1", n)
	}
	if n := count("SELECT COUNT(*) FROM subscriptions WHERE id = 7 AND status = 'past_due'"); n != 1 {
		t.Errorf("subscription 7 is not past_due")
	}
	if n := strings.Count(out.String(), "duplicate: already handled, skipped"); n != 2 {
		t.Errorf("skipped duplicates = %d, want 2", n)
	}
}
