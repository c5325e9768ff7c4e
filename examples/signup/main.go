// Command signup is the seed's first outbox consumer made concrete: a company signs up, and its
// welcome mail is enqueued in the same transaction as the company row. A signup that fails after
// the enqueue rolls back, and its mail goes with it. Then two workers deliver the mails to a fake
// mailer, which bounces one address for good: that message ends FAILED, visible to an operator,
// instead of vanishing in a swallowed error.
//
//	go run ./examples/signup -dsn 'user:pass@tcp(127.0.0.1:3306)/app?parseTime=true'
//
// The DSN defaults to $OUTBOX_DSN. The program creates its tables (companies, users) and the
// outbox's, so point it at a database of its own.
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
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/outboxgen/outboxgen/examples/events"
	"github.com/outboxgen/outboxgen/runtime/outbox"
)

func main() {
	dsn := flag.String("dsn", os.Getenv("OUTBOX_DSN"), "database DSN with parseTime=true (default $OUTBOX_DSN)")
	flag.Parse()
	if *dsn == "" {
		fmt.Fprintln(os.Stderr, "signup: no database: pass -dsn or set OUTBOX_DSN")
		os.Exit(2)
	}
	db, err := sql.Open("mysql", *dsn)
	if err != nil {
		fmt.Fprintln(os.Stderr, "signup:", err)
		os.Exit(1)
	}
	defer db.Close()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, db, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "signup:", err)
		os.Exit(1)
	}
}

const schema = `
CREATE TABLE IF NOT EXISTS companies (
    id   BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    name VARCHAR(191) NOT NULL,
    plan VARCHAR(32)  NULL
) ENGINE = InnoDB`

const usersSchema = `
CREATE TABLE IF NOT EXISTS users (
    id         BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    company_id BIGINT       NOT NULL,
    email      VARCHAR(191) NOT NULL,
    UNIQUE KEY users_email (email)
) ENGINE = InnoDB`

// form is what the signup page posts.
type form struct {
	Company, AdminEmail string
	Plan                *string // nil: the free plan
}

func plan(p string) *string { return &p }

func run(ctx context.Context, db *sql.DB, out io.Writer) error {
	if err := outbox.Migrate(ctx, db); err != nil {
		return err
	}
	for _, ddl := range []string{schema, usersSchema} {
		if _, err := db.ExecContext(ctx, ddl); err != nil {
			return fmt.Errorf("create tables: %w", err)
		}
	}

	forms := []form{
		{Company: "Acme", AdminEmail: "ops@acme.example", Plan: plan("team")},
		{Company: "Initech", AdminEmail: "bill@initech.example"},
		// Globex's admin address is already Acme's: the signup fails after its mail was enqueued.
		{Company: "Globex", AdminEmail: "ops@acme.example", Plan: plan("enterprise")},
		{Company: "Umbrella", AdminEmail: "it@umbrella.example", Plan: plan("enterprise")},
		// The mailer bounces this address: retrying cannot help, so the message ends FAILED.
		{Company: "Hooli", AdminEmail: "founder@hooli.invalid"},
	}
	for _, f := range forms {
		id, err := signUp(ctx, db, f)
		var dup *mysql.MySQLError
		switch {
		case err == nil:
			fmt.Fprintf(out, "signed up %s (company %d); welcome mail enqueued in the same transaction\n", f.Company, id)
		case errors.As(err, &dup) && dup.Number == 1062:
			fmt.Fprintf(out, "signup of %s failed and rolled back (%s): no company, no mail\n", f.Company, dup.Message)
		default:
			return fmt.Errorf("sign up %s: %w", f.Company, err)
		}
	}

	if err := printStatus(ctx, db, out, "before delivery"); err != nil {
		return err
	}
	mailer := &fakeMailer{out: out}
	if err := deliver(ctx, db, welcomeMailer{mailer: mailer}); err != nil {
		return err
	}
	if err := printStatus(ctx, db, out, "after delivery"); err != nil {
		return err
	}
	s, err := outbox.Stats(ctx, db)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%d welcome mails sent; %d FAILED for good, listed with its error by `outboxgen status`\n",
		mailer.count(), s.Failed)
	return nil
}

// signUp creates the company, enqueues its welcome mail and creates its admin user, in one
// transaction: the mail is sent if and only if the whole signup commits.
func signUp(ctx context.Context, db *sql.DB, f form) (companyID int64, err error) {
	err = outbox.InTx(ctx, db, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, "INSERT INTO companies (name, plan) VALUES (?, ?)", f.Company, f.Plan)
		if err != nil {
			return err
		}
		if companyID, err = res.LastInsertId(); err != nil {
			return err
		}
		_, err = events.EnqueueWelcomeEmail(ctx, tx, events.WelcomeEmail{
			CompanyID: companyID,
			Email:     f.AdminEmail,
			Plan:      f.Plan,
		})
		if err != nil {
			return err
		}
		// A later step that fails rolls back the company and the mail together.
		_, err = tx.ExecContext(ctx, "INSERT INTO users (company_id, email) VALUES (?, ?)", companyID, f.AdminEmail)
		return err
	})
	return companyID, err
}

// welcomeMailer handles welcome_email. It returns the mailer's error instead of swallowing it:
// the worker then retries with backoff, and a mail that keeps failing ends FAILED, visible.
type welcomeMailer struct{ mailer *fakeMailer }

func (h welcomeMailer) HandleWelcomeEmail(ctx context.Context, e events.WelcomeEmail, d outbox.Delivery) error {
	plan := "free"
	if e.Plan != nil {
		plan = *e.Plan
	}
	// The idempotency key goes to the provider, which drops a second send with the same key:
	// delivery is at-least-once, so the same mail may reach this handler twice.
	err := h.mailer.Send(ctx, e.Email, "Welcome! Your "+plan+" plan is ready.", d.IdempotencyKey)
	if errors.Is(err, errHardBounce) {
		return outbox.Permanent(err) // FAILED now: no retry can fix the address
	}
	return err // nil: SENT; any other error: retried with backoff
}

// deliver runs two workers on the table until nothing is pending or processing, then stops them.
func deliver(ctx context.Context, db *sql.DB, h events.WelcomeEmailHandler) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- runWorker(ctx, db, h)
		}()
	}

	drained := waitDrained(ctx, db)
	cancel() // the workers stop claiming and return once in-flight results are recorded
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			drained = errors.Join(drained, err)
		}
	}
	return drained
}

// runWorker is what a service runs beside its server, until ctx is done.
func runWorker(ctx context.Context, db *sql.DB, h events.WelcomeEmailHandler) error {
	router := outbox.NewRouter() // events.NewRouter(h) when h handles every event of the catalog
	events.RegisterWelcomeEmail(router, h)
	w, err := outbox.NewWorker(db, router, outbox.Config{PollInterval: 100 * time.Millisecond})
	if err != nil {
		return err // a bad Config field, a DSN without parseTime=true, a timeout >= StaleAfter
	}
	return w.Run(ctx) // returns nil once ctx is done and in-flight results are recorded
}

// waitDrained polls outbox.Stats until no message is pending or processing.
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
			return fmt.Errorf("not drained after 30s: %d pending, %d processing, %d failed", s.Pending, s.Processing, s.Failed)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// printStatus prints the message counts by status. outbox.Stats never counts SENT rows (that
// part of the table grows without bound, so operators watch pending and failed); on a demo's
// handful of rows a GROUP BY is fine.
func printStatus(ctx context.Context, db *sql.DB, out io.Writer, label string) error {
	counts := map[string]int64{}
	rows, err := db.QueryContext(ctx, "SELECT status, COUNT(*) FROM outbox_messages GROUP BY status")
	if err != nil {
		return fmt.Errorf("count messages: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var status string
		var n int64
		if err := rows.Scan(&status, &n); err != nil {
			return err
		}
		counts[status] = n
	}
	if err := rows.Err(); err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "\n  %-16s %7s %10s %5s %6s\n  %-16s %7d %10d %5d %6d\n\n",
		"outbox_messages", "pending", "processing", "sent", "failed",
		label, counts["PENDING"], counts["PROCESSING"], counts["SENT"], counts["FAILED"])
	return err
}

// errHardBounce is the provider's "this address does not exist".
var errHardBounce = errors.New("hard bounce")

// fakeMailer stands in for a mail provider's API: it prints each mail, drops a second send with
// an idempotency key it has seen (as providers that take such a key do), and bounces addresses
// in the .invalid domain.
type fakeMailer struct {
	mu   sync.Mutex
	out  io.Writer
	seen map[string]bool
	sent int
}

func (m *fakeMailer) Send(ctx context.Context, to, body, idempotencyKey string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if strings.HasSuffix(to, ".invalid") {
		return fmt.Errorf("mailer: %s: %w (no such domain)", to, errHardBounce)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.seen == nil {
		m.seen = map[string]bool{}
	}
	if m.seen[idempotencyKey] {
		_, err := fmt.Fprintf(m.out, "mailer: duplicate %s to %s dropped\n", idempotencyKey, to)
		return err
	}
	m.seen[idempotencyKey] = true
	m.sent++
	_, err := fmt.Fprintf(m.out, "mailer: to %s: %q (key %s)\n", to, body, idempotencyKey)
	return err
}

func (m *fakeMailer) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.sent
}
