package outboxtest_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/examples/events"
	"github.com/outboxgen/outboxgen/runtime/outbox"
	"github.com/outboxgen/outboxgen/runtime/outboxtest"
)

// TestEnqueuedSeesTheTestsTransaction: Enqueued reads through the handle it is given, so the
// test's uncommitted messages are there on its tx, in enqueue order, and not on the pool.
func TestEnqueuedSeesTheTestsTransaction(t *testing.T) {
	t.Parallel()
	db := outboxtest.Open(t)
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	want := []events.OrderPlaced{placed(2, "bob@example.com", 500, events.MoneyCurrencyEUR), placed(1, "ann@example.com", 1200, events.MoneyCurrencyUSD)}
	for _, e := range want {
		if _, err := events.EnqueueOrderPlaced(ctx, tx, e); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := events.EnqueueWelcomeEmail(ctx, tx, events.WelcomeEmail{CompanyID: 7, Email: "ops@example.com"}); err != nil {
		t.Fatal(err)
	}

	got := outboxtest.Enqueued[events.OrderPlaced](t, tx)
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("Enqueued on the tx = %+v, want %+v (in enqueue order)", got, want)
	}
	if got := outboxtest.Enqueued[events.WelcomeEmail](t, tx); len(got) != 1 || got[0].CompanyID != 7 {
		t.Fatalf("Enqueued[WelcomeEmail] on the tx = %+v, want the one welcome mail", got)
	}
	if got := outboxtest.Enqueued[events.OrderPlaced](t, db); len(got) != 0 {
		t.Fatalf("Enqueued on the pool sees %d uncommitted messages, want 0", len(got))
	}
	outboxtest.RequireEnqueued(t, tx, want[1])
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := outboxtest.Enqueued[events.OrderPlaced](t, db); len(got) != 2 {
		t.Fatalf("Enqueued on the pool after commit = %d messages, want 2", len(got))
	}
}

// TestRequireEnqueuedShowsDifferingFields: the failure names each differing field by its Go
// path, with both values, and only those.
func TestRequireEnqueuedShowsDifferingFields(t *testing.T) {
	t.Parallel()
	db := outboxtest.Open(t)
	ctx := context.Background()
	inTx(t, db, func(tx *sql.Tx) error {
		_, err := events.EnqueueOrderPlaced(ctx, tx, placed(1, "ann@example.com", 1200, events.MoneyCurrencyUSD))
		return err
	})

	f := run(t, func(tb testing.TB) {
		outboxtest.RequireEnqueued(tb, db, placed(1, "ann@example.com", 1500, events.MoneyCurrencyEUR))
	})
	msg := f.report()
	for _, want := range []string{`Total.Amount: got 1200, want 1500`, `Total.Currency: got "USD", want "EUR"`, `differs in 2 field(s)`} {
		if !strings.Contains(msg, want) {
			t.Errorf("failure message lacks %q:\n%s", want, msg)
		}
	}
	for _, equal := range []string{"OrderID", "CustomerEmail"} {
		if strings.Contains(msg, equal) {
			t.Errorf("failure message names %s, which is equal:\n%s", equal, msg)
		}
	}

	// The message equal to want passes; so does one whose slice is empty where want's is nil,
	// and whose time is the same instant in another location.
	failedAt := time.Date(2026, 12, 4, 9, 30, 0, 0, time.UTC)
	inTx(t, db, func(tx *sql.Tx) error {
		_, err := events.EnqueuePaymentFailed(ctx, tx, events.PaymentFailed{SubscriptionID: 3, InvoiceID: "inv-3",
			Amount: events.Money{Amount: 900, Currency: events.MoneyCurrencyKRW}, FailedAt: failedAt, Reasons: []string{}})
		return err
	})
	if f := run(t, func(tb testing.TB) {
		outboxtest.RequireEnqueued(tb, db, placed(1, "ann@example.com", 1200, events.MoneyCurrencyUSD))
		outboxtest.RequireEnqueued(tb, db, events.PaymentFailed{SubscriptionID: 3, InvoiceID: "inv-3",
			Amount: events.Money{Amount: 900, Currency: events.MoneyCurrencyKRW}, FailedAt: failedAt.In(time.FixedZone("KST", 9*3600))})
	}); f.Failed() {
		t.Fatalf("RequireEnqueued of an equal payload failed:\n%s", f.report())
	}

	// No message of the type: the failure says so, with want.
	f = run(t, func(tb testing.TB) {
		outboxtest.RequireEnqueued(tb, db, events.WelcomeEmail{CompanyID: 9, Email: "x@example.com"})
	})
	if msg := f.report(); !strings.Contains(msg, `no "welcome_email" message was enqueued`) || !strings.Contains(msg, `"x@example.com"`) {
		t.Fatalf("failure for a type never enqueued = %q", msg)
	}
}

// TestEnqueuedDecodesAsTheWorker: a payload its handler would refuse (here a field renamed
// while the row was pending) fails the test instead of reading as a zero value.
func TestEnqueuedDecodesAsTheWorker(t *testing.T) {
	t.Parallel()
	db := outboxtest.Open(t)
	if _, err := outbox.Enqueue(context.Background(), db, outbox.Message{EventType: "order_placed",
		Payload: []byte(`{"id":1,"customer_email":"ann@example.com","total":{"amount":1,"currency":"USD"}}`)}, outbox.Standalone()); err != nil {
		t.Fatal(err)
	}
	f := run(t, func(tb testing.TB) { outboxtest.Enqueued[events.OrderPlaced](tb, db) })
	if msg := f.report(); !strings.Contains(msg, "does not decode as events.OrderPlaced") || !strings.Contains(msg, "order_id") {
		t.Fatalf("Enqueued of an undecodable payload reported %q", msg)
	}
}
