package outboxtest_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/examples/events"
	"github.com/outboxgen/outboxgen/runtime/outbox"
	"github.com/outboxgen/outboxgen/runtime/outboxtest"
)

// enqueueRaw commits one message of eventType whose payload is body, with 3 attempts.
func enqueueRaw(t *testing.T, db *sql.DB, eventType, body string) {
	t.Helper()
	inTx(t, db, func(tx *sql.Tx) error {
		_, err := outbox.Enqueue(context.Background(), tx, outbox.Message{EventType: eventType, Payload: json.RawMessage(body), MaxAttempts: 3})
		return err
	})
}

// status counts db's messages by status.
func status(t *testing.T, db *sql.DB) map[string]int {
	t.Helper()
	rows, err := db.Query(`SELECT status, COUNT(*) FROM outbox_messages GROUP BY status`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var s string
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			t.Fatal(err)
		}
		out[s] = n
	}
	return out
}

// TestDrainCounts: Sent, Retried (rescheduled and left for later without RetriesNow; delivered
// again at once with it) and Failed once MaxAttempts is spent.
func TestDrainCounts(t *testing.T) {
	t.Parallel()
	db := outboxtest.Open(t)
	ctx := context.Background()
	var mu sync.Mutex
	calls := map[string]int{}
	r := outbox.NewRouter()
	r.Handle("job", outbox.Policy{MaxAttempts: 3, Backoff: outbox.Backoff{Initial: time.Hour, Max: 2 * time.Hour}}, func(_ context.Context, p json.RawMessage, _ outbox.Delivery) error {
		var j struct{ Name string }
		if err := json.Unmarshal(p, &j); err != nil {
			return err
		}
		mu.Lock()
		calls[j.Name]++
		n := calls[j.Name]
		mu.Unlock()
		switch {
		case j.Name == "flaky" && n <= 2, j.Name == "broken":
			return errors.New("not now")
		}
		return nil
	})
	for _, name := range []string{"ok1", "ok2", "flaky"} {
		enqueueRaw(t, db, "job", `{"Name":"`+name+`"}`)
	}

	// Without RetriesNow the flaky job's retry waits an hour: not due, so Drain ends.
	if got, want := outboxtest.Drain(ctx, t, db, r), (outboxtest.DrainResult{Sent: 2, Retried: 1}); got != want {
		t.Fatalf("first Drain = %+v, want %+v", got, want)
	}
	if got, want := outboxtest.Drain(ctx, t, db, r), (outboxtest.DrainResult{}); got != want {
		t.Fatalf("Drain with only a retry not due = %+v, want %+v", got, want)
	}
	if s := status(t, db); s["SENT"] != 2 || s["PENDING"] != 1 {
		t.Fatalf("statuses = %v, want 2 SENT and the flaky job PENDING", s)
	}

	// With RetriesNow a retry is due at once: the broken job spends its 3 attempts in one
	// Drain, while the first flaky job, retried before, stays an hour away.
	enqueueRaw(t, db, "job", `{"Name":"broken"}`)
	if got, want := outboxtest.Drain(ctx, t, db, r, outboxtest.RetriesNow()), (outboxtest.DrainResult{Retried: 2, Failed: 1}); got != want {
		t.Fatalf("Drain(RetriesNow) of a job that always fails = %+v, want %+v", got, want)
	}
	mu.Lock()
	calls["flaky"] = 0
	mu.Unlock()
	enqueueRaw(t, db, "job", `{"Name":"flaky"}`)
	// The new flaky job fails twice, then is sent, within one Drain.
	if got, want := outboxtest.Drain(ctx, t, db, r, outboxtest.RetriesNow()), (outboxtest.DrainResult{Sent: 1, Retried: 2}); got != want {
		t.Fatalf("Drain(RetriesNow) of a job that fails twice = %+v, want %+v", got, want)
	}
	if s := status(t, db); s["SENT"] != 3 || s["FAILED"] != 1 || s["PENDING"] != 1 {
		t.Fatalf("statuses = %v, want 3 SENT, 1 FAILED, the first flaky job PENDING", s)
	}
}

// TestDrainDeliversWhatHandlersEnqueue: an order_placed handler enqueues the welcome mail in
// its own transaction; one Drain delivers both, and an order's events in their key's order.
func TestDrainDeliversWhatHandlersEnqueue(t *testing.T) {
	t.Parallel()
	db := outboxtest.Open(t)
	ctx := context.Background()
	h := &shop{db: db}
	r := events.NewRouter(h)

	inTx(t, db, func(tx *sql.Tx) error {
		_, err := events.EnqueueOrderPlaced(ctx, tx, placed(1, "ann@example.com", 1200, events.MoneyCurrencyUSD))
		return err
	})
	inTx(t, db, func(tx *sql.Tx) error {
		_, err := events.EnqueueOrderShipped(ctx, tx, events.OrderShipped{OrderID: 1, Carrier: events.OrderShippedCarrierDhl, TrackingNumber: "T1"})
		return err
	})
	inTx(t, db, func(tx *sql.Tx) error {
		_, err := events.EnqueueOrderPaid(ctx, tx, events.OrderPaid{OrderID: 1, PaymentID: "p1", Amount: events.Money{Amount: 1200, Currency: events.MoneyCurrencyUSD}})
		return err
	})

	if got, want := outboxtest.Drain(ctx, t, db, r), (outboxtest.DrainResult{Sent: 4}); got != want {
		t.Fatalf("Drain = %+v, want %+v (three order events and the welcome mail their handler enqueued)", got, want)
	}
	orderEvents := slices.DeleteFunc(slices.Clone(h.handled), func(s string) bool { return s == "welcome_email" })
	if want := []string{"order_placed", "order_shipped", "order_paid"}; !slices.Equal(orderEvents, want) || len(h.handled) != 4 {
		t.Fatalf("handled %v, want the order's events in commit order %v, and the welcome mail", h.handled, want)
	}
	// order_shipped is delete_when_sent: its row went when it was delivered, and Drain
	// counted it as sent.
	if s := status(t, db); s["SENT"] != 3 || len(s) != 1 {
		t.Fatalf("statuses = %v, want 3 SENT (the order_shipped row deleted)", s)
	}
}

// shop handles the catalog's events, recording the order it sees them in; order_placed
// enqueues a welcome mail.
type shop struct {
	db      *sql.DB
	mu      sync.Mutex
	handled []string
}

func (s *shop) record(e outbox.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handled = append(s.handled, e.EventType())
}

func (s *shop) HandleOrderPlaced(ctx context.Context, e events.OrderPlaced, _ outbox.Delivery) error {
	s.record(e)
	return outbox.InTx(ctx, s.db, func(tx *sql.Tx) error {
		_, err := events.EnqueueWelcomeEmail(ctx, tx, events.WelcomeEmail{CompanyID: e.OrderID, Email: e.CustomerEmail})
		return err
	})
}

func (s *shop) HandleOrderPaid(_ context.Context, e events.OrderPaid, _ outbox.Delivery) error {
	s.record(e)
	return nil
}

func (s *shop) HandleOrderShipped(_ context.Context, e events.OrderShipped, _ outbox.Delivery) error {
	s.record(e)
	return nil
}

func (s *shop) HandleWelcomeEmail(_ context.Context, e events.WelcomeEmail, _ outbox.Delivery) error {
	s.record(e)
	return nil
}

func (s *shop) HandlePaymentFailed(_ context.Context, e events.PaymentFailed, _ outbox.Delivery) error {
	s.record(e)
	return nil
}

// TestDrainFailsWhenContextEnds: a handler that enqueues another message forever never lets
// the queue empty; Drain fails the test once ctx ends, with what it did by then.
func TestDrainFailsWhenContextEnds(t *testing.T) {
	t.Parallel()
	db := outboxtest.Open(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	calls := 0
	r := outbox.NewRouter()
	r.Handle("echo", outbox.Policy{}, func(hctx context.Context, _ json.RawMessage, _ outbox.Delivery) error {
		calls++
		if calls == 3 {
			cancel()
		}
		return outbox.InTx(context.WithoutCancel(hctx), db, func(tx *sql.Tx) error {
			_, err := outbox.Enqueue(hctx, tx, outbox.Message{EventType: "echo", Payload: json.RawMessage(`{}`)})
			return err
		})
	})
	enqueueRaw(t, db, "echo", `{}`)

	f := run(t, func(tb testing.TB) {
		outboxtest.Drain(ctx, tb, db, r)
		tb.Errorf("Drain returned after its context ended")
	})
	msg := f.report()
	if !strings.Contains(msg, "context canceled") || !strings.Contains(msg, "outboxtest: Drain") || strings.Contains(msg, "returned") {
		t.Fatalf("Drain after ctx ended reported %q, want a fatal failure naming the cancelled context", msg)
	}
	if calls != 3 {
		t.Fatalf("handler called %d times, want 3 (none after ctx ended)", calls)
	}
}

// TestDrainWithConfig: WithConfig's Middleware wraps the handlers, as a Worker's does.
func TestDrainWithConfig(t *testing.T) {
	t.Parallel()
	db := outboxtest.Open(t)
	var seen []string
	mw := func(next outbox.HandlerFunc) outbox.HandlerFunc {
		return func(ctx context.Context, p json.RawMessage, d outbox.Delivery) error {
			seen = append(seen, d.EventType)
			return next(ctx, p, d)
		}
	}
	r := outbox.NewRouter()
	r.Handle("job", outbox.Policy{}, func(context.Context, json.RawMessage, outbox.Delivery) error { return nil })
	enqueueRaw(t, db, "job", `{}`)
	if got := outboxtest.Drain(context.Background(), t, db, r, outboxtest.WithConfig(outbox.Config{Middleware: []outbox.Middleware{mw}})); got != (outboxtest.DrainResult{Sent: 1}) {
		t.Fatalf("Drain = %+v, want the job sent", got)
	}
	if !slices.Equal(seen, []string{"job"}) {
		t.Fatalf("middleware saw %v, want the one job", seen)
	}
}
