package outbox_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// Generated code registers typed handlers with the catalog's policy; Handle is the untyped
// primitive underneath. Zero policy fields take the built-in defaults.
func ExampleRouter_Handle() {
	r := outbox.NewRouter()
	r.Handle("welcome_email", outbox.Policy{}, func(ctx context.Context, payload json.RawMessage, d outbox.Delivery) error {
		return nil
	})
	r.Handle("payment_failed", outbox.Policy{MaxAttempts: 12, Timeout: 30 * time.Second},
		func(ctx context.Context, payload json.RawMessage, d outbox.Delivery) error {
			return nil
		})

	// A worker on this router claims only these event types.
	fmt.Println(r.EventTypes())
	p, _ := r.Policy("payment_failed")
	fmt.Printf("payment_failed: max_attempts=%d backoff=%s..%s timeout=%s\n",
		p.MaxAttempts, p.Backoff.Initial, p.Backoff.Max, p.Timeout)
	// Output:
	// [payment_failed welcome_email]
	// payment_failed: max_attempts=12 backoff=1s..1h0m0s timeout=30s
}

// The policy resolution's last step: whatever the catalog left unset.
func ExamplePolicy_WithDefaults() {
	p := outbox.Policy{Backoff: outbox.Backoff{Initial: 5 * time.Second}}.WithDefaults()
	fmt.Println(p.MaxAttempts, p.Backoff.Initial, p.Backoff.Max, p.Timeout)
	// Output:
	// 10 5s 1h0m0s 1m0s
}

// InTx is the usual way to enqueue: the message commits or rolls back with the business change,
// and after the commit this process's workers on db are woken. Generated EnqueueX functions
// call Enqueue with a typed payload; this is the untyped primitive underneath.
func ExampleInTx() {
	var db *sql.DB // sql.Open("mysql", "user:pass@tcp(host:3306)/app?parseTime=true")
	ctx := context.Background()

	err := outbox.InTx(ctx, db, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, "UPDATE subscriptions SET status = 'past_due' WHERE id = ?", 7); err != nil {
			return err // rolled back: nothing enqueued
		}
		_, err := outbox.Enqueue(ctx, tx, outbox.Message{
			EventType:      "payment_failed",
			Payload:        json.RawMessage(`{"subscription_id":7,"invoice_id":"inv-42"}`),
			IdempotencyKey: "payment_failed:6:inv-42",
		})
		return err
	})
	if err != nil {
		log.Print(err)
	}
}

// With a transaction of your own, Enqueue joins it and never commits for you; Wake after the
// commit saves the worker's poll interval.
func ExampleEnqueue() {
	var db *sql.DB
	var worker *outbox.Worker // running in this process, on db
	ctx := context.Background()

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback() // a no-op after Commit
	if _, err := outbox.Enqueue(ctx, tx, outbox.Message{
		EventType: "welcome_email",
		Payload:   json.RawMessage(`{"company_id":42,"email":"ops@acme.example"}`),
	}, outbox.Delay(time.Minute)); err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		log.Fatal(err)
	}
	worker.Wake()
}

// A service runs its worker until SIGTERM; Run then stops claiming and returns once the
// handlers in flight have finished (or hit their deadline) and their results are recorded.
func ExampleNewWorker() {
	var db *sql.DB
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	router := outbox.NewRouter() // generated code: events.NewRouter(handlers)
	router.Handle("welcome_email", outbox.Policy{Timeout: 30 * time.Second},
		func(ctx context.Context, payload json.RawMessage, d outbox.Delivery) error {
			return nil
		})
	w, err := outbox.NewWorker(db, router, outbox.Config{Concurrency: 32})
	if err != nil {
		log.Fatal(err) // names the field at fault, or the DSN parameter
	}
	if err := w.Run(ctx); err != nil {
		log.Fatal(err)
	}
}

// Permanent and RetryAfter tell the worker what to do with a failure: FAILED at once, or a
// retry at a given time instead of the policy's backoff. Any other error is retried with backoff.
func ExamplePermanent() {
	handler := func(ctx context.Context, payload json.RawMessage, d outbox.Delivery) error {
		var e struct {
			Email string `json:"email"`
		}
		if err := json.Unmarshal(payload, &e); err != nil {
			return outbox.Permanent(err) // retrying cannot fix a bad payload
		}
		if e.Email == "" {
			return outbox.Permanent(errors.New("no address to mail"))
		}
		return outbox.RetryAfter(10*time.Minute, errors.New("mail provider rate limit"))
	}

	err := handler(context.Background(), json.RawMessage(`{"email":""}`), outbox.Delivery{})
	fmt.Println(err, outbox.IsPermanent(err))
	err = handler(context.Background(), json.RawMessage(`{"email":"ops@acme.example"}`), outbox.Delivery{})
	fmt.Println(err, outbox.IsPermanent(err))
	// Output:
	// permanent: no address to mail true
	// mail provider rate limit false
}

// Once makes a handler's database effect happen at most once: the key is recorded in the
// handler's own transaction, so it commits or rolls back with the effect.
func ExampleOnce() {
	var db *sql.DB
	handler := func(ctx context.Context, payload json.RawMessage, d outbox.Delivery) error {
		return outbox.InTx(ctx, db, func(tx *sql.Tx) error {
			first, err := outbox.Once(ctx, tx, "billing.dunning", d.IdempotencyKey)
			if err != nil || !first {
				return err // a duplicate delivery: the effect is already committed
			}
			_, err = tx.ExecContext(ctx, "INSERT INTO dunning_notices (invoice_id) VALUES (JSON_VALUE(?, '$.invoice_id'))", string(payload))
			return err
		})
	}
	router := outbox.NewRouter()
	router.Handle("payment_failed", outbox.Policy{}, handler)
}

// Stats is what a dashboard or an alert reads: stuck above zero means nobody is reclaiming,
// and FAILED messages wait for a person.
func ExampleStats() {
	var db *sql.DB
	ctx := context.Background()

	s, err := outbox.Stats(ctx, db)
	if err != nil {
		log.Fatal(err)
	}
	if s.Stuck > 0 {
		log.Printf("ALERT: %d outbox messages stuck PROCESSING: is any worker reclaiming?", s.Stuck)
	}
	for eventType, c := range s.ByType {
		fmt.Printf("%s: pending=%d due=%d processing=%d stale=%d failed=%d oldest=%s\n",
			eventType, c.Pending, c.Due, c.Processing, c.Stale, c.Failed, c.OldestPending)
	}
}

// Retry returns FAILED messages to PENDING with a fresh attempt budget, once their cause is
// fixed; a dry run counts first.
func ExampleRetry() {
	var db *sql.DB
	ctx := context.Background()

	f := outbox.Filter{EventType: "payment_failed", FailedSince: time.Now().Add(-24 * time.Hour)}
	failed, err := outbox.ListFailed(ctx, db, f, 10)
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range failed {
		fmt.Printf("%d %s after %d attempts: %s\n", m.ID, m.EventType, m.Attempts, m.LastError)
	}
	f.DryRun = true
	n, err := outbox.Retry(ctx, db, f)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("would retry %d\n", n)
	f.DryRun = false
	if _, err := outbox.Retry(ctx, db, f); err != nil {
		log.Fatal(err)
	}
}

// Purge keeps the table small: SENT rows are history. It deletes in short batches, so it can
// run beside the workers; two instances running it at once only split the work.
func ExamplePurge() {
	var db *sql.DB
	ctx := context.Background()

	n, err := outbox.Purge(ctx, db, outbox.PurgeFilter{Status: outbox.StatusSent, OlderThan: 7 * 24 * time.Hour})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("purged %d sent messages\n", n)
}
