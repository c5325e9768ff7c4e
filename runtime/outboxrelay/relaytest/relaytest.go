// Package relaytest holds the test helpers of relay modules (runtime/outboxnats,
// runtime/outboxkafka, or one of your own built on runtime/outboxrelay): a migrated database
// per test (runtime/outboxtest/testdb's, on the server that OUTBOX_TEST_DSN names) with
// enqueue and inspect helpers, a worker that runs until the test ends, waits, deliveries made
// by hand, a handler that fails first attempts, and the checks every relay's Register must
// pass. Only tests import it.
package relaytest

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/examples/events"
	"github.com/outboxgen/outboxgen/internal/testutil"
	"github.com/outboxgen/outboxgen/runtime/outbox"
	"github.com/outboxgen/outboxgen/runtime/outboxrelay"
	"github.com/outboxgen/outboxgen/runtime/outboxtest/testdb"
)

// Fast is a relay policy for tests: retries come within tens of milliseconds.
var Fast = outbox.Policy{Backoff: outbox.Backoff{Initial: 20 * time.Millisecond, Max: 100 * time.Millisecond}, Timeout: 5 * time.Second}

// QuietLogger discards every record: the workers of tests log nothing.
func QuietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// DB is one test's database: created on OUTBOX_TEST_DSN's server (testdb.New), migrated with
// outbox.Migrate, dropped when the test ends.
type DB struct {
	*sql.DB
	// DSN opens another pool on the same database (another process's).
	DSN string
}

// NewDB creates t's database; without OUTBOX_TEST_DSN it skips t.
func NewDB(t testing.TB) *DB {
	t.Helper()
	d := testdb.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := outbox.Migrate(ctx, d.DB); err != nil {
		t.Fatalf("outbox.Migrate: %v", err)
	}
	return &DB{DB: d.DB, DSN: d.DSN}
}

// Enqueue enqueues a message of eventType with the idempotency key key ("" for none), on its
// own (outbox.Standalone), with attempts enough for any test.
func (db *DB) Enqueue(t testing.TB, eventType, payload, key string, opts ...outbox.EnqueueOption) outbox.MessageID {
	t.Helper()
	id, err := outbox.Enqueue(context.Background(), db, outbox.Message{
		EventType: eventType, Payload: json.RawMessage(payload), IdempotencyKey: key, MaxAttempts: 1000,
	}, append(opts, outbox.Standalone())...)
	if err != nil {
		t.Fatalf("enqueue %s: %v", eventType, err)
	}
	return id
}

// EnqueueOrdered enqueues a message with an ordering key (and no idempotency key). It may be
// called from goroutines other than the test's: a failure is an Errorf.
func (db *DB) EnqueueOrdered(t testing.TB, eventType, payload, orderingKey string) outbox.MessageID {
	t.Helper()
	id, err := outbox.Enqueue(context.Background(), db, outbox.Message{
		EventType: eventType, Payload: json.RawMessage(payload), OrderingKey: orderingKey, MaxAttempts: 1000,
	}, outbox.Standalone())
	if err != nil {
		t.Errorf("enqueue %s for %s: %v", eventType, orderingKey, err)
	}
	return id
}

// EnqueueOrderedRace enqueues perKey messages for each of producers*keysPer ordering keys
// (keyPrefix + a number), from producers goroutines that race each other; each commits its
// keys' messages one after another, so the commit order per key is the order of seq. Message
// seq of a key is eventType(seq), with the payload {"key": key, "seq": seq}. It returns the
// ids of the messages.
func (db *DB) EnqueueOrderedRace(t testing.TB, producers, keysPer, perKey int, keyPrefix string, eventType func(seq int) string) []outbox.MessageID {
	t.Helper()
	var mu sync.Mutex
	var ids []outbox.MessageID
	var wg sync.WaitGroup
	for g := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := range perKey {
				for k := range keysPer {
					key := fmt.Sprintf("%s%d", keyPrefix, g*keysPer+k)
					id := db.EnqueueOrdered(t, eventType(seq), fmt.Sprintf(`{"key": %q, "seq": %d}`, key, seq), key)
					mu.Lock()
					ids = append(ids, id)
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return ids
}

// Inspect returns the row of message id.
func (db *DB) Inspect(t testing.TB, id outbox.MessageID) outbox.Record {
	t.Helper()
	r, err := outbox.Inspect(context.Background(), db, id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Stats returns the counts of the outbox.
func (db *DB) Stats(t testing.TB) outbox.Snapshot {
	t.Helper()
	s, err := outbox.Stats(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// WaitDrained waits until no row is PENDING or PROCESSING, then fails the test if any is FAILED.
func (db *DB) WaitDrained(t testing.TB, d time.Duration) {
	t.Helper()
	WaitFor(t, d, "every message to leave PENDING and PROCESSING", func() bool {
		s := db.Stats(t)
		return s.Pending == 0 && s.Processing == 0
	})
	if s := db.Stats(t); s.Failed != 0 {
		failed, err := outbox.ListFailed(context.Background(), db, outbox.Filter{}, 5)
		t.Fatalf("%d messages FAILED, want none: %+v %v", s.Failed, failed, err)
	}
}

// WaitFor checks cond now and then until it holds, or fails the test after d.
func WaitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	testutil.Eventually(t, d, what, cond)
}

// Worker is a worker started by StartWorker.
type Worker struct {
	cancel context.CancelFunc
	done   chan error
}

// StartWorker runs a worker on db and r until Stop or the end of the test. cfg's Logger
// defaults to QuietLogger, its PollInterval to 50ms.
func StartWorker(t testing.TB, db *sql.DB, r *outbox.Router, cfg outbox.Config) *Worker {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = QuietLogger()
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 50 * time.Millisecond
	}
	w, err := outbox.NewWorker(db, r, cfg)
	if err != nil {
		t.Fatalf("NewWorker: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rw := &Worker{cancel: cancel, done: make(chan error, 1)}
	go func() { rw.done <- w.Run(ctx) }()
	t.Cleanup(func() { rw.Stop(t) })
	return rw
}

// Stop cancels Run and waits for it (idempotent).
func (rw *Worker) Stop(t testing.TB) {
	t.Helper()
	if rw.cancel == nil {
		return
	}
	rw.cancel()
	rw.cancel = nil
	select {
	case err := <-rw.done:
		if err != nil {
			t.Errorf("worker Run: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Error("worker Run did not return within 60s of its cancel")
	}
}

// Delivery is a delivery as the worker would hand it to a relay, enqueued at a fixed time.
func Delivery(id outbox.MessageID, eventType, key string, attempt int, headers map[string]string) outbox.Delivery {
	return outbox.Delivery{
		MessageID: id, EventType: eventType, IdempotencyKey: key, Attempt: attempt, MaxAttempts: 10,
		EnqueuedAt: time.Date(2025, 3, 4, 5, 6, 7, 891011000, time.UTC), Headers: headers,
	}
}

// Flaky fails first attempts around a relay's handler, for the ordering tests, by the seq of
// the payload ({"seq": n}): seq%4 == 3 fails before it publishes (FailedBefore counts them),
// seq%4 == 1 after (LostAfter: the publish's result was lost, and the redelivery publishes it
// again).
type Flaky struct {
	FailedBefore, LostAfter atomic.Int64
}

// Wrap returns publish with the failures.
func (f *Flaky) Wrap(publish outbox.HandlerFunc) outbox.HandlerFunc {
	return func(ctx context.Context, payload json.RawMessage, d outbox.Delivery) error {
		var v struct{ Seq int }
		if err := json.Unmarshal(payload, &v); err != nil {
			return err
		}
		if d.Attempt == 1 && v.Seq%4 == 3 {
			f.FailedBefore.Add(1)
			return errors.New("test: failed before publishing")
		}
		if err := publish(ctx, payload, d); err != nil {
			return err
		}
		if d.Attempt == 1 && v.Seq%4 == 1 {
			f.LostAfter.Add(1)
			return errors.New("test: published, then the result was lost")
		}
		return nil
	}
}

// Nop is a handler that does nothing.
func Nop(context.Context, json.RawMessage, outbox.Delivery) error { return nil }

// RegisterFunc is a relay's Register bound to its client: outboxnats.Register(r, js, events,
// opts...), say.
type RegisterFunc[O any] func(r *outbox.Router, events outboxrelay.Events, opts ...O) error

// Refusal is a subtest of CheckRegister: Register with Events and Opts must fail with an
// error containing Want.
type Refusal[O any] struct {
	Name   string
	Events outboxrelay.Events
	Opts   []O
	Want   string
}

// CheckRegister checks what every relay's Register does: it relays the event types of a
// router with the router's policies, after the routes already there, and refuses (each a
// subtest, leaving the router as it was) no event types, an event type already routed or
// listed twice, an empty one, and then the relay's own refusals.
func CheckRegister[O any](t *testing.T, register RegisterFunc[O], refusals ...Refusal[O]) {
	t.Helper()
	// A router as generated code builds it: Register relays its event types with its policies.
	catalog := outbox.NewRouter()
	paid := outbox.Policy{MaxAttempts: 25, Backoff: outbox.Backoff{Initial: 2 * time.Second, Max: time.Minute}, Timeout: 10 * time.Second}
	catalog.Handle("order_paid", paid, Nop)
	catalog.Handle("welcome_email", outbox.Policy{}, Nop)
	r := outbox.NewRouter()
	r.Handle("local_only", outbox.Policy{}, Nop)
	if err := register(r, catalog); err != nil {
		t.Fatalf("Register: %v", err)
	}
	if got, want := strings.Join(r.EventTypes(), ","), "local_only,order_paid,welcome_email"; got != want {
		t.Errorf("relay routes %s, want %s", got, want)
	}
	if got, _ := r.Policy("order_paid"); got != paid.WithDefaults() {
		t.Errorf("order_paid policy %+v, want the catalog's %+v", got, paid)
	}
	if got, _ := r.Policy("welcome_email"); got != (outbox.Policy{}).WithDefaults() {
		t.Errorf("welcome_email policy %+v, want the defaults", got)
	}

	common := []Refusal[O]{
		{Name: "no events", Events: outboxrelay.Types(Fast), Want: "no event types"},
		{Name: "already routed", Events: outboxrelay.Types(Fast, "x", "local_only"), Want: `event "local_only" already has a handler`},
		{Name: "listed twice", Events: outboxrelay.Types(Fast, "x", "x"), Want: `event "x" already has a handler`},
		{Name: "empty type", Events: outboxrelay.Types(Fast, ""), Want: "empty event type"},
	}
	for _, c := range append(common, refusals...) {
		t.Run(c.Name, func(t *testing.T) {
			r := outbox.NewRouter()
			r.Handle("local_only", outbox.Policy{}, Nop)
			err := register(r, c.Events, c.Opts...)
			if err == nil || !strings.Contains(err.Error(), c.Want) {
				t.Fatalf("Register = %v, want an error containing %q", err, c.Want)
			}
			if got := r.EventTypes(); len(got) != 1 {
				t.Errorf("a refused Register left routes %v, want only local_only", got)
			}
		})
	}
}

// CheckRegisterCatalog checks that Register reads a generated catalog's router, built with nil
// handlers: every outbox event of the catalog (not its direct events), with the catalog's
// policies.
func CheckRegisterCatalog[O any](t testing.TB, register RegisterFunc[O]) {
	t.Helper()
	catalog := events.NewRouter(nil)
	r := outbox.NewRouter()
	if err := register(r, catalog); err != nil {
		t.Fatalf("Register: %v", err)
	}
	got, want := strings.Join(r.EventTypes(), ","), strings.Join(catalog.EventTypes(), ",")
	if got != want || !strings.Contains(got, "welcome_email") {
		t.Errorf("relay routes %s, want the catalog's outbox events %s (welcome_email among them)", got, want)
	}
	for _, et := range catalog.EventTypes() {
		want, _ := catalog.Policy(et)
		if got, _ := r.Policy(et); got != want {
			t.Errorf("%s: policy %+v, want the catalog's %+v", et, got, want)
		}
	}
}
