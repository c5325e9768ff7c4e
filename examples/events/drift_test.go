package events_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/examples/events"
	"github.com/outboxgen/outboxgen/runtime/outbox"
	"github.com/outboxgen/outboxgen/runtime/outboxtest"
)

// recorder is a Handlers that records what reaches it. Drain calls handlers one at a time in
// the test's goroutine, so it needs no lock.
type recorder struct {
	payments []events.PaymentFailed
	welcomes []events.WelcomeEmail
	orders   []string // event type and ordering key
}

func (r *recorder) HandlePaymentFailed(_ context.Context, e events.PaymentFailed, _ outbox.Delivery) error {
	r.payments = append(r.payments, e)
	return nil
}

func (r *recorder) HandleOrderPlaced(_ context.Context, e events.OrderPlaced, d outbox.Delivery) error {
	r.orders = append(r.orders, e.EventType()+" "+d.OrderingKey)
	return nil
}

func (r *recorder) HandleOrderPaid(_ context.Context, e events.OrderPaid, d outbox.Delivery) error {
	r.orders = append(r.orders, e.EventType()+" "+d.OrderingKey)
	return nil
}

func (r *recorder) HandleOrderShipped(_ context.Context, e events.OrderShipped, d outbox.Delivery) error {
	r.orders = append(r.orders, e.EventType()+" "+d.OrderingKey)
	return nil
}

func (r *recorder) HandleWelcomeEmail(_ context.Context, e events.WelcomeEmail, _ outbox.Delivery) error {
	r.welcomes = append(r.welcomes, e)
	return nil
}

// Rows stored by an older catalog (a field renamed since, an enum value since removed, a null)
// are FAILED at the first attempt with an error naming the event and the field, and never reach
// the typed handler as zero values; the current payload, with an unknown extra field, is SENT.
func TestDriftedPayloadFailsBeforeTheHandler(t *testing.T) {
	db := outboxtest.Open(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	const good = `{"subscription_id":7,"invoice_id":"inv-1","amount":{"amount":1250,"currency":"USD"},"failed_at":"2026-03-01T00:00:00Z","reasons":null,"added_later":true}`
	rows := []struct {
		eventType, payload string
		want               string // last_error, or "" for SENT
		orderingKey        string
	}{
		{"payment_failed", good, "", ""},
		// invoice_id was called invoice when this row was enqueued.
		{"payment_failed", `{"subscription_id":7,"invoice":"inv-2","amount":{"amount":1250,"currency":"USD"},"failed_at":"2026-03-01T00:00:00Z","reasons":[]}`,
			`attempt 1: permanent: payment_failed: payload: field "invoice_id" is missing`, ""},
		{"payment_failed", `{"subscription_id":7,"invoice_id":"inv-3","amount":{"amount":1250,"currency":"XXX"},"failed_at":"2026-03-01T00:00:00Z","reasons":[]}`,
			`attempt 1: permanent: payment_failed: payload: field "amount.currency": "XXX" is not one of KRW, USD, EUR`, ""},
		{"payment_failed", `{"subscription_id":7,"invoice_id":null,"amount":{"amount":1250},"failed_at":"2026-03-01T00:00:00Z","reasons":[]}`,
			`attempt 1: permanent: payment_failed: payload: field "invoice_id" is null; field "amount.currency" is missing`, ""},
		// plan is optional: absent is fine; email is not.
		{"welcome_email", `{"company_id":42,"email":"a@example.com"}`, "", ""},
		{"welcome_email", `{"company_id":43,"mail":"b@example.com","plan":null}`, `attempt 1: permanent: welcome_email: payload: field "email" is missing`, ""},
		// Ordered rows decode the same way; a carrier since removed fails its key's head.
		{"order_placed", `{"order_id":9,"customer_email":"c@example.com","total":{"amount":500,"currency":"EUR"}}`, "", "orders:1:9"},
		{"order_shipped", `{"order_id":8,"carrier":"fedex","tracking_number":"1Z"}`,
			`attempt 1: permanent: order_shipped: payload: field "carrier": "fedex" is not one of dhl, ups, post`, "orders:1:8"},
	}
	ids := make([]outbox.MessageID, len(rows))
	if err := outbox.InTx(ctx, db, func(tx *sql.Tx) error {
		for i, r := range rows {
			id, err := outbox.Enqueue(ctx, tx, outbox.Message{EventType: r.eventType, Payload: json.RawMessage(r.payload), OrderingKey: r.orderingKey})
			if err != nil {
				return err
			}
			ids[i] = id
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	h := &recorder{}
	if got := outboxtest.Drain(ctx, t, db, events.NewRouter(h)); got != (outboxtest.DrainResult{Sent: 3, Failed: 5}) {
		t.Errorf("Drain = %+v, want the 3 current payloads sent and the 5 drifted ones failed", got)
	}

	for i, r := range rows {
		rec, err := outbox.Inspect(ctx, db, ids[i])
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case r.want == "" && rec.Status != outbox.StatusSent:
			t.Errorf("row %d (%s): %s, last_error %q; want SENT", i, r.payload, rec.Status, rec.LastError)
		case r.want != "" && (rec.Status != outbox.StatusFailed || rec.LastError != r.want || rec.Attempts != 1):
			t.Errorf("row %d (%s): %s after %d attempts, last_error %q;\nwant FAILED at the first attempt with %q", i, r.payload, rec.Status, rec.Attempts, rec.LastError, r.want)
		}
	}
	if len(h.payments) != 1 || h.payments[0].InvoiceID != "inv-1" || h.payments[0].Amount.Currency != events.MoneyCurrencyUSD {
		t.Errorf("PaymentFailed handler got %+v; want only inv-1 (drifted rows must not reach it)", h.payments)
	}
	if len(h.welcomes) != 1 || h.welcomes[0].Email != "a@example.com" || h.welcomes[0].Plan != nil {
		t.Errorf("WelcomeEmail handler got %+v; want only company 42", h.welcomes)
	}
	if len(h.orders) != 1 || h.orders[0] != "order_placed orders:1:9" {
		t.Errorf("the order handlers got %q; want only order 9's order_placed with its ordering key", h.orders)
	}
}
