// Package shop is a small service whose tests, in shop_test.go, are the ones docs/testing.md
// writes out with the test kit (runtime/outboxtest): placing an order enqueues an OrderPlaced
// with its items, the refund handler is idempotent, and a retried mail is sent once.
//
// PlaceOrder writes an order and enqueues its OrderPlaced in the caller's transaction. Service
// handles the catalog's events (events.yaml): an order's confirmation mail goes out through a
// Mailer, and a refund is recorded in the refunds table once per order, however often the
// payment provider's webhook asks for it.
package shop

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// Tables are the shop's own tables, created by CreateTables.
var tables = []string{`
CREATE TABLE IF NOT EXISTS orders (
    id             BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    customer_email VARCHAR(191) NOT NULL
) ENGINE = InnoDB`, `
CREATE TABLE IF NOT EXISTS refunds (
    order_id     BIGINT NOT NULL,
    amount_cents BIGINT NOT NULL
) ENGINE = InnoDB`,
}

// CreateTables creates the shop's tables (the outbox's come from outbox.Migrate).
func CreateTables(ctx context.Context, db *sql.DB) error {
	for _, ddl := range tables {
		if _, err := db.ExecContext(ctx, ddl); err != nil {
			return fmt.Errorf("shop: create tables: %w", err)
		}
	}
	return nil
}

// PlaceOrder writes an order on tx and enqueues its OrderPlaced there: both commit, or neither.
func PlaceOrder(ctx context.Context, tx *sql.Tx, email string, items []LineItem) (orderID int64, err error) {
	res, err := tx.ExecContext(ctx, `INSERT INTO orders (customer_email) VALUES (?)`, email)
	if err != nil {
		return 0, fmt.Errorf("shop: place order: %w", err)
	}
	if orderID, err = res.LastInsertId(); err != nil {
		return 0, fmt.Errorf("shop: place order: %w", err)
	}
	_, err = EnqueueOrderPlaced(ctx, tx, OrderPlaced{OrderID: orderID, CustomerEmail: email, Items: items})
	return orderID, err
}

// Mailer sends a mail; an error means it was not sent.
type Mailer interface {
	Send(ctx context.Context, to, subject string) error
}

// Service handles the shop's events (it implements Handlers).
type Service struct {
	DB     *sql.DB
	Mailer Mailer
}

// HandleOrderPlaced mails the order's confirmation. A failed send returns its error, so the
// message is retried.
func (s *Service) HandleOrderPlaced(ctx context.Context, e OrderPlaced, _ outbox.Delivery) error {
	return s.Mailer.Send(ctx, e.CustomerEmail, fmt.Sprintf("Your order %d is confirmed (%d items)", e.OrderID, len(e.Items)))
}

// HandleRefundRequested records the refund once per order: outbox.Once on the message's
// idempotency key (the order id) commits with the refund row, so a second request, or a
// second delivery of the same one, changes nothing.
func (s *Service) HandleRefundRequested(ctx context.Context, e RefundRequested, d outbox.Delivery) error {
	return outbox.InTx(ctx, s.DB, func(tx *sql.Tx) error {
		first, err := outbox.Once(ctx, tx, "shop.refund", d.IdempotencyKey)
		if err != nil || !first {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO refunds (order_id, amount_cents) VALUES (?, ?)`, e.OrderID, e.AmountCents)
		return err
	})
}
