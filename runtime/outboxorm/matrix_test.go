package outboxorm_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/examples/events"
	"github.com/outboxgen/outboxgen/runtime/outbox"
	"github.com/outboxgen/outboxgen/runtime/outboxtest/testdb"
)

// orm is one ORM of the matrix, opened on a test database.
type orm struct {
	// sqlDB is the pool the ORM was opened on: the workers' pool, and Wake's argument.
	sqlDB *sql.DB
	// pool is the ORM's handle outside a transaction (the one its users hold).
	pool outbox.DBTX
	// place inserts an order through the ORM and enqueues e in the same transaction of the
	// ORM, commits, and calls outbox.Wake.
	place func(ctx context.Context, item string, e events.WelcomeEmail) error
	// abandon does the same and rolls back instead of committing.
	abandon func(ctx context.Context, item string, e events.WelcomeEmail) error
}

// ormCase opens one ORM on a migrated database that also holds the business table.
type ormCase struct {
	name string
	open func(t *testing.T, db *testdb.DB) orm
}

// errRollback makes an ORM's transaction function roll back.
var errRollback = errors.New("roll back")

// ormDB is a migrated test database with the orders table every ORM writes its business change to.
func ormDB(t *testing.T) *testdb.DB {
	t.Helper()
	db := testdb.Migrated(t)
	db.MustExec(t, "CREATE TABLE orders (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, item VARCHAR(191) NOT NULL)")
	return db
}

func count(t *testing.T, db *sql.DB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRow(query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// welcome is a distinct message per call: the company id and e-mail differ.
var companies atomic.Int64

func welcome() events.WelcomeEmail {
	id := companies.Add(1)
	return events.WelcomeEmail{CompanyID: id, Email: fmt.Sprintf("c%d@example.com 'it''s' ? \\ 😀", id)}
}

// Each ORM, in its own transaction: the message commits with the business change, and goes with
// it on rollback; its pool handle is refused without Standalone and accepted with it (an
// ordered message included, which takes a transaction of its own); Wake after the commit
// brings the message to a worker that polls once an hour.
func TestORMs(t *testing.T) {
	for _, c := range ormCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			db := ormDB(t)
			o := c.open(t, db)
			ctx := context.Background()

			t.Run("commit", func(t *testing.T) {
				e := welcome()
				if err := o.place(ctx, "commit", e); err != nil {
					t.Fatal(err)
				}
				var payload []byte
				if err := o.sqlDB.QueryRow("SELECT CAST(payload AS BINARY) FROM outbox_messages WHERE idempotency_key = ? AND event_type = 'welcome_email' AND status = 'PENDING'", e.IdempotencyKey()).Scan(&payload); err != nil {
					t.Fatalf("the message after commit: %v", err)
				}
				var got events.WelcomeEmail
				if err := json.Unmarshal(payload, &got); err != nil || got != e {
					t.Errorf("stored payload %s (%v), want %+v", payload, err, e)
				}
				if n := count(t, o.sqlDB, "SELECT COUNT(*) FROM orders WHERE item = 'commit'"); n != 1 {
					t.Errorf("%d orders after commit, want 1", n)
				}
			})

			t.Run("rollback", func(t *testing.T) {
				e := welcome()
				if err := o.abandon(ctx, "rollback", e); err != nil {
					t.Fatal(err)
				}
				if n := count(t, o.sqlDB, "SELECT COUNT(*) FROM outbox_messages WHERE idempotency_key = ?", e.IdempotencyKey()); n != 0 {
					t.Errorf("%d messages after rollback, want 0", n)
				}
				if n := count(t, o.sqlDB, "SELECT COUNT(*) FROM orders WHERE item = 'rollback'"); n != 0 {
					t.Errorf("%d orders after rollback, want 0", n)
				}
			})

			t.Run("pool", func(t *testing.T) {
				e := welcome()
				_, err := events.EnqueueWelcomeEmail(ctx, o.pool, e)
				if err == nil || !strings.Contains(err.Error(), "Standalone()") {
					t.Fatalf("EnqueueWelcomeEmail on the pool handle %T: err = %v, want the refusal naming outbox.Standalone()", o.pool, err)
				}
				if n := count(t, o.sqlDB, "SELECT COUNT(*) FROM outbox_messages WHERE idempotency_key = ?", e.IdempotencyKey()); n != 0 {
					t.Errorf("%d messages after the refusal, want 0", n)
				}
				id, err := events.EnqueueWelcomeEmail(ctx, o.pool, e, outbox.Standalone())
				if err != nil {
					t.Fatalf("with Standalone: %v", err)
				}
				ordered, err := outbox.Enqueue(ctx, o.pool, outbox.Message{EventType: "ordered", Payload: []byte(`{}`), OrderingKey: "k-" + c.name}, outbox.Standalone())
				if err != nil {
					t.Fatalf("ordered, with Standalone: %v", err)
				}
				if n := count(t, o.sqlDB, "SELECT COUNT(*) FROM outbox_messages WHERE id IN (?, ?)", int64(id), int64(ordered)); n != 2 {
					t.Errorf("%d of the 2 Standalone messages committed, want 2", n)
				}
				if n := count(t, o.sqlDB, "SELECT COUNT(*) FROM outbox_ordering_queue WHERE message_id = ?", int64(ordered)); n != 1 {
					t.Errorf("the ordered message has %d queue entries, want 1", n)
				}
			})

			t.Run("wake", func(t *testing.T) {
				// A database of its own, so that the worker's first claim finds nothing.
				o := c.open(t, ormDB(t))
				delivered := make(chan int64, 8)
				obs := &claims{c: make(chan int, 8)}
				r := outbox.NewRouter()
				events.RegisterWelcomeEmail(r, welcomeHandler(delivered))
				r.Handle("ordered", outbox.Policy{}, func(context.Context, json.RawMessage, outbox.Delivery) error { return nil })
				w, err := outbox.NewWorker(o.sqlDB, r, outbox.Config{
					PollInterval: time.Hour, MinPollInterval: time.Hour, Observer: obs,
					Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
				})
				if err != nil {
					t.Fatal(err)
				}
				runCtx, cancel := context.WithCancel(ctx)
				done := make(chan error, 1)
				go func() { done <- w.Run(runCtx) }()
				defer func() {
					cancel()
					if err := <-done; err != nil {
						t.Errorf("Run: %v", err)
					}
				}()
				// Run claims once at start, then every hour.
				if n := obs.await(t); n != 0 {
					t.Fatalf("the first claim claimed %d messages, want 0", n)
				}

				// place calls Wake after its commit.
				e := welcome()
				if err := o.place(ctx, "wake", e); err != nil {
					t.Fatal(err)
				}
				select {
				case got := <-delivered:
					if got != e.CompanyID {
						t.Fatalf("delivered company %d, want %d", got, e.CompanyID)
					}
				case <-time.After(15 * time.Second):
					t.Fatal("not delivered within 15s of Wake (the worker polls once an hour)")
				}
			})
		})
	}
}

// claims reports each claim's end to c.
type claims struct {
	outbox.NopObserver
	c chan int
}

func (o *claims) Claimed(n int, _ time.Duration) {
	select {
	case o.c <- n:
	default:
	}
}

func (o *claims) await(t *testing.T) int {
	t.Helper()
	select {
	case n := <-o.c:
		return n
	case <-time.After(15 * time.Second):
		t.Fatal("the worker's first claim did not end within 15s")
	}
	return 0
}

type welcomeHandler chan int64

func (h welcomeHandler) HandleWelcomeEmail(_ context.Context, e events.WelcomeEmail, _ outbox.Delivery) error {
	h <- e.CompanyID
	return nil
}
