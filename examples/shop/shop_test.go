package shop_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/outboxgen/outboxgen/examples/shop"
	"github.com/outboxgen/outboxgen/runtime/outbox"
	"github.com/outboxgen/outboxgen/runtime/outboxtest"
)

// Placing an order enqueues an OrderPlaced with these items, in the order's transaction.
func TestPlaceOrderEnqueuesOrderPlaced(t *testing.T) {
	db := setup(t)
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()

	items := []shop.LineItem{{ProductID: "tea-100g", Quantity: 2, PriceCents: 450}, {ProductID: "mug", Quantity: 1, PriceCents: 1200}}
	id, err := shop.PlaceOrder(context.Background(), tx, "ann@example.com", items)
	if err != nil {
		t.Fatal(err)
	}
	outboxtest.RequireEnqueued(t, tx, shop.OrderPlaced{OrderID: id, CustomerEmail: "ann@example.com", Items: items})
}

// The refund handler is idempotent: the payment provider's webhook arrives twice, both
// messages are delivered, and the refund is recorded once.
func TestRefundHandlerIsIdempotent(t *testing.T) {
	db := setup(t)
	ctx := context.Background()
	for range 2 {
		if _, err := shop.EnqueueRefundRequested(ctx, db, shop.RefundRequested{OrderID: 7, AmountCents: 1200}, outbox.Standalone()); err != nil {
			t.Fatal(err)
		}
	}

	r := shop.NewRouter(&shop.Service{DB: db, Mailer: &mailer{}})
	if got := outboxtest.Drain(ctx, t, db, r); got != (outboxtest.DrainResult{Sent: 2}) {
		t.Fatalf("Drain = %+v, want both requests sent", got)
	}
	var refunds int
	if err := db.QueryRow(`SELECT COUNT(*) FROM refunds WHERE order_id = 7`).Scan(&refunds); err != nil || refunds != 1 {
		t.Fatalf("refunds of order 7 = %d (%v), want 1", refunds, err)
	}
}

// A retried mail is sent once: the mail server refuses the first try, the message is retried
// at once (RetriesNow: no backoff wait), and the customer gets one mail.
func TestRetriedMailIsSentOnce(t *testing.T) {
	db := setup(t)
	ctx := context.Background()
	if err := outbox.InTx(ctx, db, func(tx *sql.Tx) error {
		_, err := shop.PlaceOrder(ctx, tx, "ann@example.com", []shop.LineItem{{ProductID: "mug", Quantity: 1, PriceCents: 1200}})
		return err
	}); err != nil {
		t.Fatal(err)
	}

	m := &mailer{refuse: 1}
	r := shop.NewRouter(&shop.Service{DB: db, Mailer: m})
	if got := outboxtest.Drain(ctx, t, db, r, outboxtest.RetriesNow()); got != (outboxtest.DrainResult{Sent: 1, Retried: 1}) {
		t.Fatalf("Drain = %+v, want one retry, then sent", got)
	}
	if len(m.sent) != 1 || m.sent[0] != "ann@example.com" {
		t.Fatalf("mails sent to %q, want one to ann@example.com", m.sent)
	}
}

// setup gives the test a fresh database with the outbox's tables and the shop's.
func setup(t *testing.T) *sql.DB {
	t.Helper()
	t.Parallel()
	db := outboxtest.Open(t)
	if err := shop.CreateTables(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	return db
}

// mailer records the mails it sends after refusing the first refuse of them. Drain runs
// handlers in the test's goroutine, so it needs no lock.
type mailer struct {
	refuse int
	sent   []string
}

func (m *mailer) Send(_ context.Context, to, _ string) error {
	if m.refuse > 0 {
		m.refuse--
		return errors.New("421 try again later")
	}
	m.sent = append(m.sent, to)
	return nil
}
