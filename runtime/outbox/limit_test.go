package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/internal/testutil"
)

// gauge counts handlers running at once and keeps the highest count seen.
type gauge struct {
	now, peak atomic.Int64
}

func (g *gauge) enter() {
	n := g.now.Add(1)
	for {
		p := g.peak.Load()
		if n <= p || g.peak.CompareAndSwap(p, n) {
			return
		}
	}
}

func (g *gauge) leave() { g.now.Add(-1) }

// A type with Concurrency 2 never runs more than 2 handlers at once in a worker of 16 slots,
// though 20 of its messages are due, and another type's messages are delivered while both of
// its slots are held.
func TestConcurrencyLimitPerType(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	var g gauge
	release := make(chan struct{})
	var done atomic.Int64
	other := make(handled, 10)
	r := NewRouter()
	r.Handle("limited", Policy{Concurrency: 2}, func(ctx context.Context, _ json.RawMessage, _ Delivery) error {
		g.enter()
		defer g.leave()
		select {
		case <-release:
		case <-ctx.Done():
			return ctx.Err()
		}
		done.Add(1)
		return nil
	})
	r.Handle("other", Policy{}, other.handler)
	enqueueN(t, db.DB, "limited", 20)
	w := newTestWorker(t, db.DB, r, Config{Concurrency: 16})
	start(t, w)
	testutil.Eventually(t, 10*time.Second, "2 handlers of the limited type to run", func() bool { return g.now.Load() == 2 })
	ids := enqueueN(t, db.DB, "other", 5)
	other.wait(t, ids...)
	if got := g.peak.Load(); got != 2 {
		t.Fatalf("limited handlers at once: %d, want 2", got)
	}
	if got := countRows(t, db, "status = 'PROCESSING' AND event_type = 'limited'"); got != 2 {
		t.Fatalf("limited rows PROCESSING: %d, want 2 (a claim must not take rows it cannot start)", got)
	}
	close(release)
	testutil.Eventually(t, 20*time.Second, "every limited message to be handled", func() bool { return done.Load() == 20 })
	if got := g.peak.Load(); got != 2 {
		t.Fatalf("limited handlers at once: %d, want 2", got)
	}
}

// A rate of 10/s shared by two workers: 30 messages take about 3 seconds from an empty bucket,
// no second holds more than the rate allows, and another type enqueued meanwhile is delivered
// at once.
func TestRateLimitAcrossWorkers(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	var mu sync.Mutex
	var at []time.Time
	r := NewRouter()
	r.Handle("limited", Policy{RateLimit: Rate{N: 10, Per: time.Second}}, func(context.Context, json.RawMessage, Delivery) error {
		mu.Lock()
		at = append(at, time.Now())
		mu.Unlock()
		return nil
	})
	other := make(handled, 10)
	r.Handle("other", Policy{}, other.handler)
	enqueueN(t, db.DB, "limited", 30)
	began := time.Now()
	for range 2 {
		start(t, newTestWorker(t, db.DB, r, Config{}))
	}
	// The bucket starts empty, so the first tokens come after 100ms: another type's message
	// enqueued now must not wait for them.
	sent := time.Now()
	ids := enqueueN(t, db.DB, "other", 3)
	other.wait(t, ids...)
	if d := time.Since(sent); d > time.Second {
		t.Errorf("another type's messages took %s beside a rate-limited backlog", d)
	}
	testutil.Eventually(t, 20*time.Second, "30 limited messages", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(at) == 30
	})
	mu.Lock()
	defer mu.Unlock()
	if took := at[len(at)-1].Sub(began); took < 2700*time.Millisecond || took > 6*time.Second {
		t.Errorf("30 messages at 10/s took %s, want about 3s", took)
	}
	// Any window of one second holds at most the second's 10 tokens, and half as many again
	// for the time from a claim to its handlers' start, which a busy machine stretches.
	for i := range at {
		n := 0
		for j := i; j < len(at) && at[j].Sub(at[i]) < time.Second; j++ {
			n++
		}
		if n > 15 {
			t.Fatalf("%d messages within one second from message %d, want at most 15", n, i)
		}
	}
}

// The hand-off leaves a message PENDING for a claim when its type has no free slot, or has a
// rate limit, and hands it off when its type has a slot.
func TestHandoffHonoursLimits(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	release := make(chan struct{})
	started := make(chan MessageID, 10)
	r := NewRouter()
	r.Handle("one", Policy{Concurrency: 1}, func(ctx context.Context, _ json.RawMessage, d Delivery) error {
		started <- d.MessageID
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	})
	r.Handle("rated", Policy{RateLimit: Rate{N: 1000, Per: time.Second}}, func(context.Context, json.RawMessage, Delivery) error { return nil })
	w := newTestWorker(t, db.DB, r, idleWorkerConfig(Config{}))
	start(t, w)
	waitIdle(t, w)
	enqueueIn := func(typ string) (id MessageID, status string) {
		t.Helper()
		err := InTx(ctx, db.DB, func(tx *sql.Tx) error {
			var err error
			id, err = Enqueue(ctx, tx, Message{EventType: typ, Payload: json.RawMessage(`{}`)})
			if err != nil {
				return err
			}
			status, _ = statusIn(t, tx, id)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return id, status
	}
	first, st := enqueueIn("one")
	if st != "PROCESSING" {
		t.Fatalf("the first message of a type with a free slot was written %s, want PROCESSING (handed off)", st)
	}
	if got := <-started; got != first {
		t.Fatalf("started %d, want %d", got, first)
	}
	claims := w.claims.Load()
	second, st := enqueueIn("one")
	if st != "PENDING" {
		t.Fatalf("a message of a type at its concurrency limit was written %s, want PENDING", st)
	}
	if _, st := enqueueIn("rated"); st != "PENDING" {
		t.Fatalf("a message of a rate-limited type was written %s, want PENDING", st)
	}
	// The claims InTx's wakes started have passed the type by, as it had no free slot.
	testutil.Eventually(t, 10*time.Second, "the claims of InTx's wakes to end", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.claims.Load() > claims && w.claiming == 0
	})
	if st := statusOf(t, db, second); st != "PENDING" {
		t.Fatalf("the message of a type at its concurrency limit is %s, want PENDING", st)
	}
	close(release)
	// The poll is an hour: the second message is claimed because the slot freed.
	select {
	case got := <-started:
		if got != second {
			t.Fatalf("started %d, want %d", got, second)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the held message was not claimed once its type's slot freed")
	}
}

// Drain ignores both limits: a type limited to one handler and one message a minute is drained
// at once.
func TestDrainIgnoresLimits(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	var n atomic.Int64
	r := NewRouter()
	r.Handle("limited", Policy{Concurrency: 1, RateLimit: Rate{N: 1, Per: time.Minute}}, func(context.Context, json.RawMessage, Delivery) error {
		n.Add(1)
		return nil
	})
	enqueueN(t, db.DB, "limited", 5)
	w := newTestWorker(t, db.DB, r, Config{BatchSize: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := w.Drain(ctx, DrainOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Sent != 5 || n.Load() != 5 {
		t.Fatalf("Drain sent %d (handled %d), want 5", c.Sent, n.Load())
	}
}

// NewWorker refuses limits out of range, naming the event and the field.
func TestLimitPolicyRefused(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	for _, c := range []struct {
		p    Policy
		want string
	}{
		{Policy{Concurrency: -1}, "Concurrency -1"},
		{Policy{Concurrency: maxTypeConcurrency + 1}, "Concurrency"},
		{Policy{RateLimit: Rate{N: 0, Per: time.Second}}, "RateLimit.N 0"},
		{Policy{RateLimit: Rate{N: 5}}, "RateLimit.Per 0s"},
		{Policy{RateLimit: Rate{N: maxRateN + 1, Per: time.Second}}, "RateLimit.N"},
		{Policy{RateLimit: Rate{N: 5, Per: 48 * time.Hour}}, "RateLimit.Per 48h"},
	} {
		r := NewRouter()
		r.Handle("x", c.p, func(context.Context, json.RawMessage, Delivery) error { return nil })
		_, err := NewWorker(db.DB, r, fastConfig(Config{}))
		if err == nil || !strings.Contains(err.Error(), `event "x"`) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewWorker with %+v: %v, want an error naming %q", c.p, err, c.want)
		}
	}
}
