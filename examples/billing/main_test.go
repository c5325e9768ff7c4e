package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/internal/testdb"
)

func TestBillingDuplicateDeliveryHasOneEffect(t *testing.T) {
	d := testdb.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	var out bytes.Buffer
	if err := run(ctx, d.DB, &out); err != nil {
		t.Fatalf("run: %v\noutput:\n%s", err, out.String())
	}
	t.Logf("output:\n%s", out.String())

	count := func(q string) int {
		t.Helper()
		var n int
		if err := d.QueryRow(q).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}
	// Two messages (the webhook came twice), both SENT, three deliveries in all (one retried).
	if n := count("SELECT COUNT(*) FROM outbox_messages WHERE event_type = 'payment_failed' AND status = 'SENT'"); n != 2 {
		t.Errorf("SENT payment_failed messages = %d, want 2", n)
	}
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
