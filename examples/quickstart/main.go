// Command quickstart is the README's program on one screen: it signs a company up and enqueues
// its welcome mail in the same transaction, then runs a worker that delivers the mail, until
// Ctrl-C. It creates its table (companies) and the outbox's, so point it at a database of its
// own:
//
//	OUTBOX_DSN='user:pass@tcp(127.0.0.1:3306)/app?parseTime=true' go run ./examples/quickstart
package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"

	_ "github.com/go-sql-driver/mysql" // registers the "mysql" driver with database/sql

	"github.com/outboxgen/outboxgen/examples/events" // the package go generate wrote
	"github.com/outboxgen/outboxgen/runtime/outbox"
)

func main() {
	db, err := sql.Open("mysql", os.Getenv("OUTBOX_DSN")) // needs parseTime=true
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, db, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, db *sql.DB, out io.Writer) error {
	if err := outbox.Migrate(ctx, db); err != nil { // the outbox's tables
		return err
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS companies (
		id BIGINT AUTO_INCREMENT PRIMARY KEY, name VARCHAR(191) NOT NULL)`); err != nil {
		return err
	}

	// The company and its welcome mail commit together, or neither does.
	err := outbox.InTx(ctx, db, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, "INSERT INTO companies (name) VALUES (?)", "Acme")
		if err != nil {
			return err
		}
		id, err := res.LastInsertId()
		if err != nil {
			return err
		}
		_, err = events.EnqueueWelcomeEmail(ctx, tx, events.WelcomeEmail{CompanyID: id, Email: "ops@acme.example"})
		return err
	})
	if err != nil {
		return err
	}

	// A worker delivers committed messages, at least once, until ctx is done.
	router := outbox.NewRouter()
	events.RegisterWelcomeEmail(router, mailer{out: out})
	w, err := outbox.NewWorker(db, router, outbox.Config{})
	if err != nil {
		return err
	}
	return w.Run(ctx)
}

type mailer struct{ out io.Writer }

func (m mailer) HandleWelcomeEmail(ctx context.Context, e events.WelcomeEmail, d outbox.Delivery) error {
	_, err := fmt.Fprintf(m.out, "welcome mail to %s (idempotency key %s)\n", e.Email, d.IdempotencyKey)
	return err // nil: SENT; an error: retried with backoff; outbox.Permanent(err): FAILED at once
}
