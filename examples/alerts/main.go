// Command alerts shows what must never go through the outbox: an operational alert that
// reports a database failure. Writing it to the database that just failed would fail exactly
// when it matters, so ops_db_write_failed is declared `delivery: direct` in events.yaml and
// the generated SendOpsDBWriteFailed calls the handler in-process, with bounded retries, never
// touching the database.
//
// By default the program points at a dead DSN (nothing listens on 127.0.0.1:1): the business
// write fails, and the alert still reaches the (fake) pager.
//
//	go run ./examples/alerts
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

	_ "github.com/go-sql-driver/mysql"

	"github.com/outboxgen/outboxgen/examples/events"
	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// deadDSN names a port where nothing listens.
const deadDSN = "shop:secret@tcp(127.0.0.1:1)/shop?parseTime=true&timeout=2s"

func main() {
	dsn := flag.String("dsn", deadDSN, "database DSN (default: a dead one, to show the alert)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *dsn, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "alerts:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, dsn string, out io.Writer) error {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	pager := &pager{out: out, flaky: 1}

	// The payment provider says the charge succeeded; recording it fails.
	err = markInvoicePaid(ctx, db, "inv-2026-0042")
	if err == nil {
		fmt.Fprintln(out, "invoice marked paid; nothing to alert")
		return nil
	}
	fmt.Fprintf(out, "recording the payment failed: %v\n", err)
	alert := events.OpsDBWriteFailed{
		Operation: "mark invoice inv-2026-0042 paid (the charge succeeded)",
		Detail:    err.Error(),
	}
	if err := events.SendOpsDBWriteFailed(ctx, pager, alert); err != nil {
		// The last channel left: the process's own stderr, through the caller.
		return fmt.Errorf("ops alert not delivered: %w", err)
	}
	fmt.Fprintf(out, "alert delivered after %d attempt(s), without the database\n", pager.attempts())
	return nil
}

func markInvoicePaid(ctx context.Context, db *sql.DB, invoiceID string) error {
	_, err := db.ExecContext(ctx, "UPDATE invoices SET paid_at = UTC_TIMESTAMP(6) WHERE id = ?", invoiceID)
	return err
}

// pager stands in for a paging service reached over its own network path. Its first flaky
// calls fail, as a real endpoint sometimes does, to show SendOpsDBWriteFailed's retries.
type pager struct {
	out   io.Writer
	mu    sync.Mutex
	calls int
	flaky int
}

func (p *pager) HandleOpsDBWriteFailed(ctx context.Context, e events.OpsDBWriteFailed, d outbox.Delivery) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	if p.calls <= p.flaky {
		return errors.New("pager: 503 service unavailable")
	}
	_, err := fmt.Fprintf(p.out, "PAGE on-call: %s: %s\n", e.Operation, e.Detail)
	return err
}

func (p *pager) attempts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls
}
