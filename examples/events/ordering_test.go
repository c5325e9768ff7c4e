package events_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/examples/events"
	"github.com/outboxgen/outboxgen/runtime/outbox"
	"github.com/outboxgen/outboxgen/runtime/outboxtest"
)

// The generated EnqueueX stores the ordering key with the message; unordered events store none.
func TestEnqueueStoresTheOrderingKey(t *testing.T) {
	db := outboxtest.Open(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	var placed, paid, welcome outbox.MessageID
	if err := outbox.InTx(ctx, db, func(tx *sql.Tx) error {
		var err error
		total := events.Money{Amount: 990, Currency: events.MoneyCurrencyEUR}
		if placed, err = events.EnqueueOrderPlaced(ctx, tx, events.OrderPlaced{OrderID: 42, CustomerEmail: "a@example.com", Total: total}); err != nil {
			return err
		}
		if paid, err = events.EnqueueOrderPaid(ctx, tx, events.OrderPaid{OrderID: 42, PaymentID: "pay-1", Amount: total}); err != nil {
			return err
		}
		welcome, err = events.EnqueueWelcomeEmail(ctx, tx, events.WelcomeEmail{CompanyID: 1, Email: "a@example.com"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[outbox.MessageID]string{placed: "orders:2:42", paid: "orders:2:42", welcome: ""} {
		rec, err := outbox.Inspect(ctx, db, id)
		if err != nil {
			t.Fatal(err)
		}
		if rec.OrderingKey != want {
			t.Errorf("message %d (%s): ordering key %q, want %q", id, rec.EventType, rec.OrderingKey, want)
		}
	}
}
