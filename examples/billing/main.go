// Command billing shows a handler whose effect must happen once even though delivery is
// at-least-once. A subscription's payment fails: in one transaction the subscription goes
// past_due and payment_failed is enqueued. The handler records a dunning notice in its own
// transaction, guarded by outbox.Once on the message's idempotency key (the invoice id).
//
// The demo forces duplicates twice over: the payment provider's webhook arrives twice, so the
// same invoice is enqueued twice; and the first delivery fails after its transaction committed,
// as if the worker had died before marking the message SENT, so it is delivered again. Three
// deliveries, one notice.
//
//	go run ./examples/billing -dsn 'user:pass@tcp(127.0.0.1:3306)/app?parseTime=true'
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/outboxgen/outboxgen/examples/events"
	"github.com/outboxgen/outboxgen/runtime/outbox"
)

func main() {
	dsn := flag.String("dsn", os.Getenv("OUTBOX_DSN"), "database DSN with parseTime=true (default $OUTBOX_DSN)")
	flag.Parse()
	if *dsn == "" {
		fmt.Fprintln(os.Stderr, "billing: no database: pass -dsn or set OUTBOX_DSN")
		os.Exit(2)
	}
	db, err := sql.Open("mysql", *dsn)
	if err != nil {
		fmt.Fprintln(os.Stderr, "billing:", err)
		os.Exit(1)
	}
	defer db.Close()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, db, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "billing:", err)
		os.Exit(1)
	}
}

var tables = []string{`
CREATE TABLE IF NOT EXISTS subscriptions (
    id       BIGINT       NOT NULL PRIMARY KEY,
    customer VARCHAR(191) NOT NULL,
    status   ENUM('active', 'past_due') NOT NULL
) ENGINE = InnoDB`, `
CREATE TABLE IF NOT EXISTS dunning_notices (
    id              BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    subscription_id BIGINT       NOT NULL,
    invoice_id      VARCHAR(64)  NOT NULL,
    amount          BIGINT       NOT NULL,
    currency        CHAR(3)      NOT NULL
) ENGINE = InnoDB`}

func run(ctx context.Context, db *sql.DB, out io.Writer) error {
	if err := outbox.Migrate(ctx, db); err != nil {
		return err
	}
	for _, ddl := range tables {
		if _, err := db.ExecContext(ctx, ddl); err != nil {
			return fmt.Errorf("create tables: %w", err)
		}
	}
	if _, err := db.ExecContext(ctx,
		"INSERT INTO subscriptions (id, customer, status) VALUES (7, 'Acme', 'active')"); err != nil {
		return err
	}

	failure := events.PaymentFailed{
		SubscriptionID: 7,
		InvoiceID:      "inv-2026-0042",
		Amount:         events.Money{Amount: 4900, Currency: events.MoneyCurrencyUSD},
		FailedAt:       time.Now().UTC(),
		Reasons:        []string{"card_declined"},
	}
	// The provider's webhook is delivered twice; each call runs the same transaction.
	for range 2 {
		if err := paymentFailed(ctx, db, failure); err != nil {
			return err
		}
		fmt.Fprintf(out, "webhook: invoice %s failed; subscription %d past_due, payment_failed enqueued\n",
			failure.InvoiceID, failure.SubscriptionID)
	}

	h := &dunning{db: db, out: out, crashOnce: true}
	router := outbox.NewRouter()
	events.RegisterPaymentFailed(router, h)
	if err := deliver(ctx, db, router); err != nil {
		return err
	}

	var notices int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM dunning_notices").Scan(&notices); err != nil {
		return err
	}
	fmt.Fprintf(out, "%d deliveries, %d dunning notice(s)\n", h.deliveries(), notices)
	return nil
}

// paymentFailed is the webhook's transaction: the state change and the event commit together.
func paymentFailed(ctx context.Context, db *sql.DB, e events.PaymentFailed) error {
	return outbox.InTx(ctx, db, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx,
			"UPDATE subscriptions SET status = 'past_due' WHERE id = ?", e.SubscriptionID); err != nil {
			return err
		}
		_, err := events.EnqueuePaymentFailed(ctx, tx, e)
		return err
	})
}

// dunning handles payment_failed by recording a dunning notice, once per invoice.
type dunning struct {
	db  *sql.DB
	out io.Writer

	mu        sync.Mutex
	calls     int
	crashOnce bool // fail the first delivery after its commit, as a worker dying before SENT would
}

func (h *dunning) HandlePaymentFailed(ctx context.Context, e events.PaymentFailed, d outbox.Delivery) error {
	var first bool
	err := outbox.InTx(ctx, h.db, func(tx *sql.Tx) error {
		var err error
		// Once records the key in outbox_inbox inside this transaction: if the notice's INSERT
		// rolls back, so does the key, and the next delivery tries again.
		first, err = outbox.Once(ctx, tx, "billing.dunning", d.IdempotencyKey)
		if err != nil || !first {
			return err
		}
		_, err = tx.ExecContext(ctx,
			"INSERT INTO dunning_notices (subscription_id, invoice_id, amount, currency) VALUES (?, ?, ?, ?)",
			e.SubscriptionID, e.InvoiceID, e.Amount.Amount, string(e.Amount.Currency))
		return err
	})
	if err != nil {
		return err
	}

	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls++
	effect := "notice recorded"
	if !first {
		effect = "duplicate: already handled, skipped"
	}
	fmt.Fprintf(h.out, "handler: message %d attempt %d, key %s: %s\n", d.MessageID, d.Attempt, d.IdempotencyKey, effect)
	if h.crashOnce && first {
		h.crashOnce = false
		// The notice is committed but the worker is told the delivery failed: it retries.
		return outbox.RetryAfter(100*time.Millisecond, errors.New("simulated crash after commit"))
	}
	return nil
}

func (h *dunning) deliveries() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls
}

// deliver runs one worker until nothing is pending or processing.
func deliver(ctx context.Context, db *sql.DB, router *outbox.Router) error {
	w, err := outbox.NewWorker(db, router, outbox.Config{PollInterval: 50 * time.Millisecond})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()

	drained := waitDrained(ctx, db)
	cancel()
	return errors.Join(drained, <-done)
}

func waitDrained(ctx context.Context, db *sql.DB) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		s, err := outbox.Stats(ctx, db)
		if err != nil {
			return err
		}
		if s.Pending == 0 && s.Processing == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not drained after 30s: %d pending, %d processing", s.Pending, s.Processing)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
