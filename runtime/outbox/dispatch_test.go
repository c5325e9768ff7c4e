package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/internal/testutil"
	"github.com/outboxgen/outboxgen/runtime/incident"
)

func TestRetryWithBackoffThenSuccess(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	c := newCalls()
	var mu sync.Mutex
	var failedAt []time.Time // database clock at each failing call
	var nextAt []time.Time   // next_attempt_at seen by the following call
	r := NewRouter()
	r.Handle("retry_twice", Policy{Backoff: Backoff{Initial: 300 * time.Millisecond, Max: time.Second}},
		func(ctx context.Context, p json.RawMessage, d Delivery) error {
			n := c.add(d, p)
			mu.Lock()
			defer mu.Unlock()
			if n > 1 {
				nextAt = append(nextAt, getRow(t, db, d.MessageID).NextAttemptAt)
			}
			if n <= 2 {
				failedAt = append(failedAt, dbNow(t, db))
				return fmt.Errorf("transient %d", n)
			}
			return nil
		})
	w := newTestWorker(t, db.DB, r, Config{})
	w.jitter = func(n int64) int64 { return n } // the ceiling of full jitter, to see the push
	start(t, w)
	id := enqueueN(t, db.DB, "retry_twice", 1)[0]
	testutil.Eventually(t, 10*time.Second, "SENT after two failures", func() bool { return statusOf(t, db, id) == "SENT" })
	row := getRow(t, db, id)
	if c.of(id) != 3 || row.Attempts != 3 {
		t.Fatalf("calls %d, attempts %d; want 3 and 3", c.of(id), row.Attempts)
	}
	if !strings.Contains(row.LastError.String, "attempt 2 of 10: transient 2") {
		t.Errorf("last_error = %q, want the second failure", row.LastError.String)
	}
	mu.Lock()
	defer mu.Unlock()
	// Attempt n waits min(Max, Initial*2^(n-1)): 300ms, then 600ms, from the failure's write.
	for i, want := range []time.Duration{300 * time.Millisecond, 600 * time.Millisecond} {
		got := nextAt[i].Sub(failedAt[i])
		if got < want || got > want+time.Second {
			t.Errorf("failure %d: next_attempt_at - failure time = %v, want %v (plus write latency)", i+1, got, want)
		}
	}
}

// The n-th retry waits between b and 1.5 x b, b = min(Max, Initial x 2^(n-1)), capped at Max:
// never sooner than Initial (full jitter retried after 46 ms with Initial 100 ms).
func TestBackoffJitterAboveTheBase(t *testing.T) {
	w := &Worker{jitter: func(n int64) int64 { return n }}
	b := Backoff{Initial: time.Second, Max: time.Minute}
	for attempt, want := range map[int]time.Duration{1: 1500 * time.Millisecond, 2: 3 * time.Second, 5: 24 * time.Second,
		6: 48 * time.Second, 7: time.Minute /* 96s, capped */, 500: time.Minute} {
		if got := w.backoff(b, attempt); got != want {
			t.Errorf("longest wait for attempt %d = %v, want %v", attempt, got, want)
		}
	}
	w.jitter = func(int64) int64 { return 0 }
	for attempt, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 6: 32 * time.Second, 7: time.Minute} {
		if got := w.backoff(b, attempt); got != want {
			t.Errorf("shortest wait for attempt %d = %v, want %v", attempt, got, want)
		}
	}
	// The real jitter stays in [b, 1.5b] and varies.
	w = &Worker{jitter: func(n int64) int64 { return mrand.Int64N(n + 1) }}
	b = Backoff{Initial: 100 * time.Millisecond, Max: time.Hour}
	seen := map[time.Duration]bool{}
	for range 1000 {
		d := w.backoff(b, 1)
		if d < 100*time.Millisecond || d > 150*time.Millisecond {
			t.Fatalf("first retry after %v, want within [100ms, 150ms]", d)
		}
		seen[d] = true
	}
	if len(seen) < 10 {
		t.Errorf("1000 first retries took %d distinct delays: not jittered", len(seen))
	}
	// The largest Max the validation admits does not overflow.
	w.jitter = func(n int64) int64 { return n }
	if got := w.backoff(Backoff{Initial: time.Second, Max: maxDelay}, 200); got != maxDelay {
		t.Errorf("backoff at the largest Max = %v, want %v", got, maxDelay)
	}
}

func TestPermanentAndExhaustedThenRetry(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	c := newCalls()
	var healed atomic.Bool
	r := NewRouter()
	r.Handle("perm", Policy{}, func(ctx context.Context, p json.RawMessage, d Delivery) error {
		c.add(d, p)
		return Permanent(errors.New("card declined"))
	})
	r.Handle("always_fails", Policy{Backoff: Backoff{Initial: time.Millisecond, Max: 5 * time.Millisecond}},
		func(ctx context.Context, p json.RawMessage, d Delivery) error {
			c.add(d, p)
			if healed.Load() {
				return nil
			}
			return errors.New("downstream 503")
		})
	w := newTestWorker(t, db.DB, r, Config{})
	sig := signals(t, w)
	start(t, w)
	var perm, fails MessageID
	err := InTx(ctx, db.DB, func(tx *sql.Tx) error {
		var err error
		if perm, err = Enqueue(ctx, tx, Message{EventType: "perm", Payload: []byte(`{}`)}); err != nil {
			return err
		}
		fails, err = Enqueue(ctx, tx, Message{EventType: "always_fails", Payload: []byte(`{}`), MaxAttempts: 3})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "both FAILED", func() bool {
		return statusOf(t, db, perm) == "FAILED" && statusOf(t, db, fails) == "FAILED"
	})
	sig.awaitClaims(3) // a few more polls: no further call may come
	p, f := getRow(t, db, perm), getRow(t, db, fails)
	if c.of(perm) != 1 || p.Attempts != 1 || !strings.Contains(p.LastError.String, "card declined") || !p.FailedAt.Valid {
		t.Errorf("Permanent: calls %d, row %+v; want 1 call, attempts 1, last_error, failed_at", c.of(perm), p)
	}
	if c.of(fails) != 3 || f.Attempts != 3 || !strings.Contains(f.LastError.String, "attempt 3 of 3: downstream 503") {
		t.Errorf("exhausted: calls %d, row %+v; want exactly 3 calls and last_error of attempt 3", c.of(fails), f)
	}

	healed.Store(true)
	n, err := Retry(ctx, db, Filter{IDs: []MessageID{fails}})
	if err != nil || n != 1 {
		t.Fatalf("Retry = %d, %v", n, err)
	}
	w.Wake()
	testutil.Eventually(t, 5*time.Second, "retried message SENT", func() bool { return statusOf(t, db, fails) == "SENT" })
	if got := getRow(t, db, fails).Attempts; got != 1 || c.of(fails) != 4 {
		t.Errorf("after Retry: attempts %d, calls %d; want 1 (reset) and 4", got, c.of(fails))
	}
}

func TestPanicAndUndecodablePayload(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	c := newCalls()
	type welcome struct {
		CompanyID int64 `json:"company_id"`
	}
	r := NewRouter()
	r.Handle("panics", Policy{}, func(ctx context.Context, p json.RawMessage, d Delivery) error {
		c.add(d, p)
		if string(p) == `{"boom":true}` {
			panic("handler bug")
		}
		return nil
	})
	// What a generated wrapper does: a payload that does not decode is Permanent.
	r.Handle("typed", Policy{}, func(ctx context.Context, p json.RawMessage, d Delivery) error {
		c.add(d, p)
		var e welcome
		if err := json.Unmarshal(p, &e); err != nil {
			return Permanent(fmt.Errorf("decode typed: %w", err))
		}
		return nil
	})
	w := newTestWorker(t, db.DB, r, Config{Concurrency: 2})
	start(t, w)
	var boom, bad, ok1, ok2 MessageID
	err := InTx(ctx, db.DB, func(tx *sql.Tx) error {
		var err error
		enq := func(id *MessageID, typ, payload string, max int) {
			if err == nil {
				*id, err = Enqueue(ctx, tx, Message{EventType: typ, Payload: []byte(payload), MaxAttempts: max})
			}
		}
		enq(&boom, "panics", `{"boom":true}`, 1)
		enq(&bad, "typed", `{"company_id":"not a number"}`, 10)
		enq(&ok1, "panics", `{"boom":false}`, 10)
		enq(&ok2, "typed", `{"company_id":1}`, 10)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, "all four settled", func() bool {
		return statusOf(t, db, boom) == "FAILED" && statusOf(t, db, bad) == "FAILED" &&
			statusOf(t, db, ok1) == "SENT" && statusOf(t, db, ok2) == "SENT"
	})
	b := getRow(t, db, boom)
	if !strings.Contains(b.LastError.String, "panic: handler bug") || !strings.Contains(b.LastError.String, "goroutine ") {
		t.Errorf("panic last_error = %q, want the panic value and its stack", b.LastError.String)
	}
	u := getRow(t, db, bad)
	if u.Attempts != 1 || !strings.Contains(u.LastError.String, "decode typed") || c.of(bad) != 1 {
		t.Errorf("undecodable: attempts %d, calls %d, last_error %q; want FAILED at once with the decode error", u.Attempts, c.of(bad), u.LastError.String)
	}
	// The worker survived the panic: a message enqueued afterwards is still delivered.
	late := enqueueN(t, db.DB, "panics", 1)[0]
	testutil.Eventually(t, 5*time.Second, "message after the panic SENT", func() bool { return statusOf(t, db, late) == "SENT" })
}

func TestHandlerHungPastTimeoutReportedAndSuccessCounts(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	inc := &incidents{}
	hungSeen := make(chan struct{})
	var seen sync.Once
	rep := incident.Func(func(ctx context.Context, in incident.Incident) {
		inc.Report(ctx, in)
		if in.Kind == incident.HandlerHung {
			seen.Do(func() { close(hungSeen) })
		}
	})
	r := NewRouter()
	r.Handle("hangs", Policy{Timeout: 100 * time.Millisecond}, func(ctx context.Context, p json.RawMessage, d Delivery) error {
		// Ignores ctx until it is reported hung, then succeeds.
		select {
		case <-hungSeen:
		case <-time.After(10 * time.Second):
		}
		return nil
	})
	w := newTestWorker(t, db.DB, r, Config{Reporter: rep})
	start(t, w)
	id := enqueueN(t, db.DB, "hangs", 1)[0]
	testutil.Eventually(t, 5*time.Second, "SENT", func() bool { return statusOf(t, db, id) == "SENT" })
	if inc.count(incident.HandlerHung) != 1 {
		t.Fatalf("HandlerHung incidents = %d, want 1", inc.count(incident.HandlerHung))
	}
}

// A prefetched row that waited so long for a slot that its handler could outlive the lease is
// given back unhandled (PENDING, due now) rather than run where a reclaim could run it twice,
// and gets its claim's attempt back: its first real delivery says Attempt 1. The slow handler
// holds the only slot until the rows behind it are claimed, then moves the worker's clock
// ahead instead of taking the time: those rows read as having waited 900ms.
func TestPrefetchedRowGivenBackBeforeLeaseRisk(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	c := newCalls()
	var slow atomic.Bool
	var clock *aheadClock
	prefetched := make(chan struct{})
	var once sync.Once
	letGo := func() { once.Do(func() { close(prefetched) }) }
	r := NewRouter()
	r.Handle("giveback", Policy{Timeout: 300 * time.Millisecond}, func(_ context.Context, p json.RawMessage, d Delivery) error {
		c.add(d, p)
		if slow.CompareAndSwap(true, false) {
			<-prefetched                          // ignores its context: keeps the only slot
			clock.advance(900 * time.Millisecond) // for 900ms, as the worker reads it
		}
		return nil
	})
	in := &incidents{}
	logs := &logRecords{}
	w := newTestWorker(t, db.DB, r, Config{Concurrency: 1, BatchSize: 20, StaleAfter: time.Second, Reporter: in, Logger: slog.New(logs)})
	clock = clockAhead(w)
	start(t, w)
	// Teach the worker that handlers are fast, so the next claim prefetches.
	warm := enqueueN(t, db.DB, "giveback", 30)
	testutil.Eventually(t, 10*time.Second, "warm-up SENT", func() bool { return countRows(t, db, "status='SENT'") == len(warm) })
	slow.Store(true)
	t.Cleanup(letGo)
	ids := enqueueN(t, db.DB, "giveback", 6)
	w.Wake()
	testutil.Eventually(t, 10*time.Second, "every row claimed while the slow handler holds the slot", func() bool {
		return countRows(t, db, "status='PROCESSING'") == len(ids)
	})
	letGo()
	testutil.Eventually(t, 15*time.Second, "all SENT", func() bool { return countRows(t, db, "status='SENT'") == len(warm)+len(ids) })
	for _, id := range ids {
		if n := c.of(id); n != 1 {
			t.Fatalf("message %d handled %d times, want exactly 1", id, n)
		}
		if row := getRow(t, db, id); row.Attempts != 1 {
			t.Errorf("message %d: attempts %d after one delivery, want 1 (a give-back is not an attempt)", id, row.Attempts)
		}
	}
	c.mu.Lock()
	for _, d := range c.deliveries {
		if d.Attempt != 1 {
			t.Errorf("message %d delivered as attempt %d, want 1", d.MessageID, d.Attempt)
		}
	}
	c.mu.Unlock()
	if _, ok := logs.find("outbox message given back"); !ok {
		t.Fatalf("no prefetched row was given back while the only slot was held 900ms past a 1s lease")
	}
}

// With max_attempts 2, a row given back and then failing once is retried, not FAILED.
func TestGiveBackKeepsTheAttemptBudget(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	id, err := Enqueue(ctx, db, Message{EventType: "budget", Payload: json.RawMessage(`{}`), MaxAttempts: 2}, Standalone())
	if err != nil {
		t.Fatal(err)
	}
	r := NewRouter()
	r.Handle("budget", Policy{}, func(context.Context, json.RawMessage, Delivery) error { return errors.New("first failure") })
	w := newTestWorker(t, db.DB, r, Config{})
	got, _, err := w.claim(ctx, 1, claimPos{})
	if err != nil || len(got) != 1 {
		t.Fatalf("claim: %d rows, %v", len(got), err)
	}
	if _, refused := w.writeResults(ctx, []result{w.giveBack(got[0], "test")}); refused != 0 {
		t.Fatalf("give-back refused")
	}
	row := getRow(t, db, id)
	if row.Status != "PENDING" || row.Attempts != 0 || row.NextAttemptAt.After(dbNow(t, db)) {
		t.Fatalf("after give-back: %s, attempts %d, due %v; want PENDING, 0, due now", row.Status, row.Attempts, row.NextAttemptAt)
	}
	got, _, err = w.claim(ctx, 1, claimPos{})
	if err != nil || len(got) != 1 || got[0].attempt != 1 {
		t.Fatalf("claim after give-back: %+v, %v; want attempt 1", got, err)
	}
	w.writeResults(ctx, []result{w.handle(ctx, got[0])})
	if row := getRow(t, db, id); row.Status != "PENDING" || row.Attempts != 1 {
		t.Errorf("after the first real failure with max_attempts 2: %s, attempts %d; want PENDING, 1", row.Status, row.Attempts)
	}
}

// retry_in=0s beside outcome=failed reads as "retrying at once": it is logged for retries only.
func TestHandlerFailedLogsRetryInOnlyForRetries(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	for _, c := range []struct {
		name        string
		err         error
		attempt     int
		wantOutcome Outcome
	}{
		{"retry", errors.New("try later"), 1, OutcomeRetried},
		{"permanent", Permanent(errors.New("bad input")), 1, OutcomeFailed},
		{"exhausted", errors.New("still down"), 3, OutcomeFailed},
	} {
		t.Run(c.name, func(t *testing.T) {
			logs := &logRecords{}
			r := NewRouter()
			r.Handle("fails", Policy{MaxAttempts: 3}, func(context.Context, json.RawMessage, Delivery) error { return c.err })
			w := newTestWorker(t, db.DB, r, Config{Logger: slog.New(logs)})
			res := w.handle(context.Background(), claimed{id: 1, eventType: "fails", payload: []byte("{}"), attempt: c.attempt, maxAttempts: 3, token: "t"})
			attrs, ok := logs.find("outbox handler failed")
			if res.outcome != c.wantOutcome || !ok || attrs["outcome"] != string(c.wantOutcome) {
				t.Fatalf("outcome %s, log %v; want %s logged", res.outcome, attrs, c.wantOutcome)
			}
			if _, has := attrs["retry_in"]; has != (c.wantOutcome == OutcomeRetried) {
				t.Fatalf("outcome %s logged with %v: want retry_in only when retrying", res.outcome, attrs)
			}
		})
	}
}
