package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/internal/faultdriver"
	"github.com/outboxgen/outboxgen/runtime/incident"
)

func TestDeliverAfterCommitNeverAfterRollback(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	c := newCalls()
	r := NewRouter()
	r.Handle("deliver_once", Policy{}, func(ctx context.Context, p json.RawMessage, d Delivery) error {
		c.add(d, p)
		return nil
	})
	w := newTestWorker(t, db.DB, r, Config{})
	start(t, w)

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Enqueue(ctx, tx, Message{EventType: "deliver_once", Payload: []byte(`{"rolled":"back"}`)}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	var keyed, unkeyed MessageID
	err = InTx(ctx, db.DB, func(tx *sql.Tx) error {
		var err error
		if keyed, err = Enqueue(ctx, tx, Message{EventType: "deliver_once", Payload: []byte(`{"company_id": 7}`), IdempotencyKey: "company:7"}); err != nil {
			return err
		}
		unkeyed, err = Enqueue(ctx, tx, Message{EventType: "deliver_once", Payload: []byte(`{"company_id": 8}`)})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "both messages SENT", func() bool {
		return statusOf(t, db, keyed) == "SENT" && statusOf(t, db, unkeyed) == "SENT"
	})
	time.Sleep(100 * time.Millisecond) // a few more polls: nothing else may arrive
	if c.total() != 2 || c.of(keyed) != 1 || c.of(unkeyed) != 1 {
		t.Fatalf("handler calls: total %d, keyed %d, unkeyed %d; want exactly one each and none for the rolled-back message",
			c.total(), c.of(keyed), c.of(unkeyed))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.payloads[keyed] != `{"company_id": 7}` {
		t.Errorf("payload = %s, want the enqueued bytes", c.payloads[keyed])
	}
	for _, d := range c.deliveries {
		switch d.MessageID {
		case keyed:
			if d.IdempotencyKey != "company:7" {
				t.Errorf("keyed delivery key = %q", d.IdempotencyKey)
			}
		case unkeyed:
			if d.IdempotencyKey != fmt.Sprintf("msg:%d", unkeyed) {
				t.Errorf("unkeyed delivery key = %q, want msg:<id>", d.IdempotencyKey)
			}
		}
		if d.Attempt != 1 || d.EventType != "deliver_once" || d.EnqueuedAt.IsZero() || len(d.ClaimToken) != 32 {
			t.Errorf("delivery = %+v, want attempt 1, the event type, EnqueuedAt and a 32-char claim token", d)
		}
	}
	row := getRow(t, db, keyed)
	if row.Attempts != 1 || !row.SentAt.Valid || row.ClaimToken.String == "" {
		t.Errorf("sent row = %+v, want attempts 1, sent_at, claim_token kept", row)
	}
}

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
	waitFor(t, 10*time.Second, "SENT after two failures", func() bool { return statusOf(t, db, id) == "SENT" })
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

func TestBackoffFullJitter(t *testing.T) {
	w := &Worker{jitter: func(n int64) int64 { return n }}
	b := Backoff{Initial: time.Second, Max: time.Minute}
	for attempt, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 6: 32 * time.Second, 7: time.Minute, 500: time.Minute} {
		if got := w.backoff(b, attempt); got != want {
			t.Errorf("ceiling for attempt %d = %v, want %v", attempt, got, want)
		}
	}
	w.jitter = func(int64) int64 { return 0 }
	if got := w.backoff(b, 3); got != 0 {
		t.Errorf("floor = %v, want 0 (full jitter)", got)
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
	waitFor(t, 10*time.Second, "both FAILED", func() bool {
		return statusOf(t, db, perm) == "FAILED" && statusOf(t, db, fails) == "FAILED"
	})
	time.Sleep(100 * time.Millisecond)
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
	waitFor(t, 5*time.Second, "retried message SENT", func() bool { return statusOf(t, db, fails) == "SENT" })
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
	waitFor(t, 5*time.Second, "all four settled", func() bool {
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
	waitFor(t, 5*time.Second, "message after the panic SENT", func() bool { return statusOf(t, db, late) == "SENT" })
}

func TestUnhandledTypeStaysPending(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	r := NewRouter()
	r.Handle("handled_here", Policy{}, func(context.Context, json.RawMessage, Delivery) error { return nil })
	w := newTestWorker(t, db.DB, r, Config{})
	start(t, w)
	other := enqueueN(t, db.DB, "new_type_from_newer_release", 3)
	mine := enqueueN(t, db.DB, "handled_here", 3)
	waitFor(t, 5*time.Second, "handled rows SENT", func() bool { return countRows(t, db, "event_type='handled_here' AND status='SENT'") == 3 })
	time.Sleep(150 * time.Millisecond) // several more polls
	for _, id := range other {
		if r := getRow(t, db, id); r.Status != "PENDING" || r.Attempts != 0 || r.ClaimToken.Valid {
			t.Errorf("unhandled row %+v, want PENDING, attempts 0, never claimed", r)
		}
	}
	_ = mine
}

func TestTwoWorkersDrain3000ExactlyOnce(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	const total = 3000
	ids := enqueueN(t, db.DB, "drain_two", total)

	var mu sync.Mutex
	active := map[MessageID]bool{}
	count := map[MessageID]int{}
	byWorker := [2]int{}
	overlaps := 0
	handler := func(worker int) HandlerFunc {
		return func(ctx context.Context, p json.RawMessage, d Delivery) error {
			mu.Lock()
			if active[d.MessageID] {
				overlaps++
			}
			active[d.MessageID] = true
			count[d.MessageID]++
			byWorker[worker]++
			mu.Unlock()
			time.Sleep(100 * time.Microsecond) // widen the window an overlap would need
			mu.Lock()
			delete(active, d.MessageID)
			mu.Unlock()
			return nil
		}
	}
	var workers []*Worker
	for i := 0; i < 2; i++ {
		r := NewRouter()
		r.Handle("drain_two", Policy{}, handler(i))
		pool := db.Open(t) // each worker its own *sql.DB, as two processes would have
		workers = append(workers, newTestWorker(t, pool, r, Config{Concurrency: 8, BatchSize: 50}))
	}
	for _, w := range workers {
		start(t, w)
	}
	waitFor(t, 60*time.Second, "3000 SENT", func() bool { return countRows(t, db, "status='SENT'") == total })
	for _, w := range workers {
		_ = w
	}
	mu.Lock()
	defer mu.Unlock()
	if overlaps != 0 {
		t.Errorf("%d deliveries overlapped another delivery of the same message", overlaps)
	}
	for _, id := range ids {
		if count[id] != 1 {
			t.Fatalf("message %d handled %d times, want exactly 1", id, count[id])
		}
	}
	if byWorker[0] == 0 || byWorker[1] == 0 || byWorker[0]+byWorker[1] != total {
		t.Fatalf("work split %v, want both workers > 0 and %d in all", byWorker, total)
	}
	t.Logf("split between the two workers: %v", byWorker)
	if n := countRows(t, db, "attempts <> 1"); n != 0 {
		t.Errorf("%d rows with attempts != 1", n)
	}
}

func TestAbandonedClaimReclaimedAndLateResultFenced(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	c := newCalls()
	router := func() *Router {
		r := NewRouter()
		r.Handle("abandoned", Policy{Timeout: 100 * time.Millisecond}, func(ctx context.Context, p json.RawMessage, d Delivery) error {
			c.add(d, p)
			return nil
		})
		return r
	}
	dead := newTestWorker(t, db.Open(t), router(), Config{StaleAfter: 400 * time.Millisecond})
	id := enqueueN(t, db.DB, "abandoned", 1)[0]
	// The "dead" worker claims and never records: what a crash between claim and record leaves.
	got, _, err := dead.claim(ctx, 1, claimPos{})
	if err != nil || len(got) != 1 || got[0].id != id {
		t.Fatalf("claim = %+v, %v", got, err)
	}
	first := getRow(t, db, id)
	if first.Status != "PROCESSING" || first.Attempts != 1 || first.ClaimToken.String != got[0].token {
		t.Fatalf("after claim: %+v", first)
	}

	alive := newTestWorker(t, db.Open(t), router(), Config{StaleAfter: 5 * time.Second, ReclaimInterval: 50 * time.Millisecond})
	start(t, alive)
	waitFor(t, 10*time.Second, "reclaimed and delivered by the other worker", func() bool { return statusOf(t, db, id) == "SENT" })
	sent := getRow(t, db, id)
	if c.of(id) != 1 || sent.Attempts != 2 || sent.ClaimToken.String == got[0].token {
		t.Fatalf("after reclaim: calls %d, row %+v; want one delivery, attempts 2 (the dead claim counted), a new token", c.of(id), sent)
	}
	c.mu.Lock()
	d := c.deliveries[0]
	c.mu.Unlock()
	if d.Attempt != 2 || d.ClaimToken != sent.ClaimToken.String {
		t.Errorf("delivery %+v, want attempt 2 under the new claim's token", d)
	}

	// The dead worker comes back and writes its late results: the fence refuses every one.
	for _, res := range []result{
		{id: id, token: got[0].token, outcome: OutcomeSent},
		{id: id, token: got[0].token, outcome: OutcomeFailed, lastError: "late failure"},
		{id: id, token: got[0].token, outcome: OutcomeRetried, delay: time.Hour, lastError: "late retry"},
	} {
		written, refused := dead.writeResults(ctx, []result{res})
		if written != 0 || refused != 1 {
			t.Errorf("late %s: written %d refused %d; want 0 and 1", res.outcome, written, refused)
		}
	}
	if after := getRow(t, db, id); after != sent {
		t.Fatalf("late results changed the row:\nbefore %+v\nafter  %+v", sent, after)
	}
}

func TestStuckReportedWhenNobodyReclaims(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	inc := &incidents{}
	var stuckSeen atomic.Int64
	r := NewRouter()
	r.Handle("stuck_type", Policy{Timeout: 100 * time.Millisecond}, func(context.Context, json.RawMessage, Delivery) error { return nil })
	ids := enqueueN(t, db.DB, "stuck_type", 2)
	// ids[0]: claimed 10s ago under a 1s lease: 10s > 3 x 1s, stuck. ids[1]: stale, not stuck.
	setRow(t, db, ids[0], processingSQL, -10, -9)
	setRow(t, db, ids[1], processingSQL, -2, -1)
	s, err := Stats(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if s.Stuck != 1 || s.Stale != 2 || s.Processing != 2 {
		t.Fatalf("Stats = %+v, want stuck 1, stale 2, processing 2", s)
	}
	w := newTestWorker(t, db.DB, r, Config{
		DisableReclaim: true, ReclaimInterval: 30 * time.Millisecond, StaleAfter: time.Second,
		Reporter: inc, Observer: stuckObserver{&stuckSeen},
	})
	stop := start(t, w)
	waitFor(t, 5*time.Second, "two Stuck incidents (one per watch pass)", func() bool { return inc.count(incident.Stuck) >= 2 })
	stop()
	in := inc.first(incident.Stuck)
	if in.Err == nil || !strings.Contains(in.Err.Error(), "1 messages") || stuckSeen.Load() != 1 {
		t.Errorf("incident %+v, observer saw %d; want the count of 1 stuck row", in, stuckSeen.Load())
	}
	if got := statusOf(t, db, ids[0]); got != "PROCESSING" {
		t.Errorf("DisableReclaim worker moved the stuck row to %s", got)
	}

	// A worker that reclaims clears it: the stuck row had 1 attempt of 10, so PENDING, then SENT.
	w2 := newTestWorker(t, db.DB, r, Config{ReclaimInterval: 30 * time.Millisecond, StaleAfter: time.Second})
	start(t, w2)
	waitFor(t, 5*time.Second, "reclaimed rows SENT", func() bool { return countRows(t, db, "status='SENT'") == 2 })
}

type stuckObserver struct{ n *atomic.Int64 }

func (stuckObserver) Claimed(int, time.Duration)             {}
func (stuckObserver) Handled(string, Outcome, time.Duration) {}
func (stuckObserver) Reclaimed(int64)                        {}
func (o stuckObserver) Stuck(n int64)                        { o.n.Store(n) }

// A reclaim moves an expired lease back to PENDING, or to FAILED when the attempts are
// exhausted, without adding an attempt (the claim counted it), and says why on the row either
// way: otherwise a worker's crash or a hung handler leaves no trace an operator can read (the
// incident is only in that worker's log).
func TestReclaimSaysWhy(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		maxAttempts int
		status      string
		why         string
	}{
		{1, "FAILED", "attempts exhausted"},
		{2, "PENDING", "reclaimed for another attempt"},
	} {
		db := migrated(t)
		ctx := context.Background()
		r := NewRouter()
		r.Handle("kills_worker", Policy{Timeout: 50 * time.Millisecond}, func(context.Context, json.RawMessage, Delivery) error { return nil })
		w := newTestWorker(t, db.DB, r, Config{StaleAfter: 200 * time.Millisecond})
		id := enqueueN(t, db.DB, "kills_worker", 1)[0]
		setRow(t, db, id, "max_attempts = ?", c.maxAttempts)
		got, _, err := w.claim(ctx, 1, claimPos{})
		if err != nil || len(got) != 1 {
			t.Fatalf("claim: %v %v", got, err)
		}
		time.Sleep(300 * time.Millisecond)
		n, err := w.reclaimOnce(ctx)
		if err != nil || n != 1 {
			t.Fatalf("reclaimOnce = %d, %v; want 1", n, err)
		}
		row := getRow(t, db, id)
		if row.Status != c.status || row.Attempts != 1 || row.FailedAt.Valid != (c.status == "FAILED") ||
			!strings.Contains(row.LastError.String, "lease expired (claim "+got[0].token+")") || !strings.Contains(row.LastError.String, c.why) {
			t.Fatalf("max_attempts %d: row %+v, want %s with attempts still 1 (reclaim adds none) and last_error saying %q",
				c.maxAttempts, row, c.status, c.why)
		}
	}
}

func TestTwoStaleAfterValuesOnOneTable(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	r := NewRouter()
	r.Handle("lease", Policy{Timeout: 100 * time.Millisecond}, func(context.Context, json.RawMessage, Delivery) error { return nil })
	short := newTestWorker(t, db.Open(t), r, Config{StaleAfter: 700 * time.Millisecond})
	long := newTestWorker(t, db.Open(t), r, Config{StaleAfter: 30 * time.Second})
	enqueueN(t, db.DB, "lease", 2)
	a, _, err := short.claim(ctx, 1, claimPos{})
	if err != nil || len(a) != 1 {
		t.Fatal(a, err)
	}
	b, _, err := long.claim(ctx, 1, claimPos{})
	if err != nil || len(b) != 1 {
		t.Fatal(b, err)
	}
	ra, rb := getRow(t, db, a[0].id), getRow(t, db, b[0].id)
	if got := ra.ReclaimAfter.Time.Sub(ra.ClaimedAt.Time); got != 700*time.Millisecond {
		t.Errorf("short worker's lease = %v, want 700ms", got)
	}
	if got := rb.ReclaimAfter.Time.Sub(rb.ClaimedAt.Time); got != 30*time.Second {
		t.Errorf("long worker's lease = %v, want 30s", got)
	}
	time.Sleep(time.Second)
	// Any worker's reclaim honours each row's own lease: only the short one has expired.
	n, err := long.reclaimOnce(ctx)
	if err != nil || n != 1 {
		t.Fatalf("reclaimOnce = %d, %v; want 1", n, err)
	}
	if statusOf(t, db, a[0].id) != "PENDING" || statusOf(t, db, b[0].id) != "PROCESSING" {
		t.Fatalf("after reclaim: short-lease row %s, long-lease row %s; want PENDING and PROCESSING",
			statusOf(t, db, a[0].id), statusOf(t, db, b[0].id))
	}
}

func TestEnqueueNotBlockedByOpenClaim(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	r := NewRouter()
	r.Handle("gap", Policy{}, func(context.Context, json.RawMessage, Delivery) error { return nil })
	w := newTestWorker(t, db.Open(t), r, Config{})
	enqueueN(t, db.DB, "gap", 3)
	enqueueN(t, db.DB, "gap", 2, Delay(time.Hour)) // rows past the due range
	inClaim, release := make(chan struct{}), make(chan struct{})
	w.afterClaimSelect = func() {
		close(inClaim)
		<-release
	}
	claimErr := make(chan error, 1)
	go func() {
		got, _, err := w.claim(ctx, 10, claimPos{})
		if err == nil && len(got) != 3 {
			err = fmt.Errorf("claimed %d rows, want the 3 due ones", len(got))
		}
		claimErr <- err
	}()
	<-inClaim
	// The claim transaction now holds its locks. An application transaction that enqueues and
	// commits must not wait for it (a REPEATABLE READ claim would block it with a gap lock).
	tctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	began := time.Now()
	err := InTx(tctx, db.DB, func(tx *sql.Tx) error {
		_, err := Enqueue(tctx, tx, Message{EventType: "gap", Payload: []byte(`{}`)})
		return err
	})
	took := time.Since(began)
	close(release)
	if err != nil {
		t.Fatalf("enqueue + commit during an open claim: %v (after %v)", err, took)
	}
	if took > time.Second {
		t.Errorf("enqueue + commit took %v during an open claim, want no wait", took)
	}
	if err := <-claimErr; err != nil {
		t.Fatal(err)
	}
}

func TestConfigValidation(t *testing.T) {
	db := migrated(t)
	r := NewRouter()
	r.Handle("cfg", Policy{Timeout: time.Minute}, func(context.Context, json.RawMessage, Delivery) error { return nil })
	cases := []struct {
		cfg  Config
		want string
	}{
		{Config{BatchSize: -1}, "Config.BatchSize"},
		{Config{BatchSize: 1 << 20}, "Config.BatchSize"},
		{Config{Concurrency: -3}, "Config.Concurrency"},
		{Config{PollInterval: -time.Second}, "Config.PollInterval"},
		{Config{StaleAfter: -time.Second}, "Config.StaleAfter"},
		{Config{ShutdownTimeout: -time.Second}, "Config.ShutdownTimeout"},
		{Config{ReclaimInterval: -time.Second}, "Config.ReclaimInterval"},
		{Config{StaleAfter: time.Minute}, `event "cfg": timeout 1m0s is not shorter than Config.StaleAfter`},
		{Config{StaleAfter: 30 * time.Second}, `event "cfg"`},
	}
	for _, c := range cases {
		_, err := NewWorker(db.DB, r, c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewWorker(%+v) err = %v, want it to name %q", c.cfg, err, c.want)
		}
	}
	if _, err := NewWorker(db.DB, NewRouter(), Config{}); err == nil {
		t.Error("empty router: want an error")
	}
	if _, err := NewWorker(nil, r, Config{}); err == nil {
		t.Error("nil db: want an error")
	}
	w, err := NewWorker(db.DB, r, Config{})
	if err != nil {
		t.Fatalf("zero Config: %v", err)
	}
	want := Config{BatchSize: 100, Concurrency: 16, PollInterval: time.Second, StaleAfter: 5 * time.Minute,
		ShutdownTimeout: 30 * time.Second, ReclaimInterval: time.Minute}
	got := w.cfg
	if got.BatchSize != want.BatchSize || got.Concurrency != want.Concurrency || got.PollInterval != want.PollInterval ||
		got.StaleAfter != want.StaleAfter || got.ShutdownTimeout != want.ShutdownTimeout || got.ReclaimInterval != want.ReclaimInterval ||
		got.Logger == nil || got.Reporter == nil || got.Observer == nil {
		t.Errorf("defaults = %+v, want %+v with Logger, Reporter, Observer set", got, want)
	}

	noParse, err := sql.Open("mysql", strings.Replace(db.DSN, "parseTime=true", "parseTime=false", 1))
	if err != nil {
		t.Fatal(err)
	}
	defer noParse.Close()
	if _, err := NewWorker(noParse, r, Config{}); err == nil || !strings.Contains(err.Error(), "parseTime=true") {
		t.Errorf("DSN without parseTime: err = %v", err)
	}
	local, err := sql.Open("mysql", db.DSN+"&loc=Local")
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	if time.Local != time.UTC {
		if _, err := NewWorker(local, r, Config{}); err == nil || !strings.Contains(err.Error(), "loc=UTC") {
			t.Errorf("DSN with loc=Local: err = %v", err)
		}
	}
	// Run twice at once is refused.
	w2 := newTestWorker(t, db.DB, r, Config{})
	stop := start(t, w2)
	waitFor(t, 5*time.Second, "Run started", w2.running.Load)
	if err := w2.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "already running") {
		t.Errorf("second Run: %v, want already running", err)
	}
	stop()
}

func TestShutdownLetsInFlightFinishAndRecords(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	inc := &incidents{}
	started := make(chan MessageID, 3)
	r := NewRouter()
	// Finishes 300ms after shutdown begins, ignoring ctx: its result must still be recorded.
	r.Handle("slow_ok", Policy{Timeout: time.Second}, func(ctx context.Context, p json.RawMessage, d Delivery) error {
		started <- d.MessageID
		time.Sleep(300 * time.Millisecond)
		return nil
	})
	// Waits for its context: cancelled at ShutdownTimeout, then retried later.
	r.Handle("waits_ctx", Policy{Timeout: 4 * time.Second}, func(ctx context.Context, p json.RawMessage, d Delivery) error {
		started <- d.MessageID
		<-ctx.Done()
		return ctx.Err()
	})
	// Ignores its context past every deadline: Run returns without it.
	hungRelease := make(chan struct{})
	t.Cleanup(func() { close(hungRelease) })
	r.Handle("ignores_ctx", Policy{Timeout: 4 * time.Second}, func(ctx context.Context, p json.RawMessage, d Delivery) error {
		started <- d.MessageID
		<-hungRelease
		return nil
	})
	w := newTestWorker(t, db.DB, r, Config{ShutdownTimeout: 600 * time.Millisecond, Reporter: inc})
	slow := enqueueN(t, db.DB, "slow_ok", 1)[0]
	waits := enqueueN(t, db.DB, "waits_ctx", 1)[0]
	hung := enqueueN(t, db.DB, "ignores_ctx", 1)[0]
	stop := start(t, w)
	for i := 0; i < 3; i++ {
		select {
		case <-started:
		case <-time.After(5 * time.Second):
			t.Fatal("handlers did not start")
		}
	}
	// Due 200ms from now, in the middle of the shutdown window: claiming has stopped by then.
	later := enqueueN(t, db.DB, "slow_ok", 1, Delay(200*time.Millisecond))[0]
	began := time.Now()
	stop()
	took := time.Since(began)
	if took < 600*time.Millisecond || took > 600*time.Millisecond+shutdownGrace+2*time.Second {
		t.Errorf("Run returned %v after cancel, want about ShutdownTimeout (600ms) plus the grace", took)
	}
	if s := getRow(t, db, slow); s.Status != "SENT" {
		t.Errorf("in-flight handler that finished during shutdown: %s, want SENT", s.Status)
	}
	if s := getRow(t, db, waits); s.Status != "PENDING" || s.Attempts != 1 || !strings.Contains(s.LastError.String, "context canceled") {
		t.Errorf("handler cancelled at ShutdownTimeout: %+v, want PENDING for retry with its error", s)
	}
	if s := getRow(t, db, hung); s.Status != "PROCESSING" {
		t.Errorf("handler ignoring its context: %s, want PROCESSING (reclaimed after its lease)", s.Status)
	}
	if inc.count(incident.HandlerHung) != 1 || !strings.Contains(inc.first(incident.HandlerHung).Subject, fmt.Sprint(hung)) {
		t.Errorf("incidents %+v, want one HandlerHung for message %d", inc.all, hung)
	}
	if s := getRow(t, db, later); s.Status != "PENDING" || s.Attempts != 0 {
		t.Errorf("message that became due during shutdown: %+v, want untouched (no claim after cancel)", s)
	}
}

func TestHandlerHungPastTimeoutReportedAndSuccessCounts(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	inc := &incidents{}
	r := NewRouter()
	r.Handle("hangs", Policy{Timeout: 100 * time.Millisecond}, func(ctx context.Context, p json.RawMessage, d Delivery) error {
		time.Sleep(500 * time.Millisecond) // ignores ctx, then succeeds
		return nil
	})
	w := newTestWorker(t, db.DB, r, Config{Reporter: inc})
	start(t, w)
	id := enqueueN(t, db.DB, "hangs", 1)[0]
	waitFor(t, 5*time.Second, "SENT", func() bool { return statusOf(t, db, id) == "SENT" })
	if inc.count(incident.HandlerHung) != 1 {
		t.Fatalf("HandlerHung incidents = %d, want 1", inc.count(incident.HandlerHung))
	}
}

func TestInTxWakesWorker(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	r := NewRouter()
	done := make(chan time.Time, 1)
	r.Handle("wake", Policy{}, func(context.Context, json.RawMessage, Delivery) error {
		done <- time.Now()
		return nil
	})
	w := newTestWorker(t, db.DB, r, Config{PollInterval: time.Minute})
	start(t, w)
	time.Sleep(100 * time.Millisecond) // let the first (empty) claim pass; the worker now waits a minute
	began := time.Now()
	err := InTx(ctx, db.DB, func(tx *sql.Tx) error {
		_, err := Enqueue(ctx, tx, Message{EventType: "wake", Payload: []byte(`{}`)})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case at := <-done:
		if d := at.Sub(began); d > 2*time.Second {
			t.Errorf("delivered %v after commit", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("InTx did not wake the worker (PollInterval is 1m)")
	}
}

type claimObserver struct {
	NopObserver
	mu       sync.Mutex
	maxClaim int
	handled  map[Outcome]int
}

func (o *claimObserver) Claimed(n int, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.maxClaim = max(o.maxClaim, n)
}

func (o *claimObserver) Handled(_ string, out Outcome, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.handled == nil {
		o.handled = map[Outcome]int{}
	}
	o.handled[out]++
}

func TestClaimNeverExceedsFreeSlots(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	obs := &claimObserver{}
	release := make(chan struct{})
	var running, peak atomic.Int64
	r := NewRouter()
	r.Handle("slots", Policy{}, func(context.Context, json.RawMessage, Delivery) error {
		peak.Store(max(peak.Load(), running.Add(1)))
		defer running.Add(-1)
		<-release
		return nil
	})
	w := newTestWorker(t, db.DB, r, Config{Concurrency: 2, BatchSize: 100, Observer: obs})
	enqueueN(t, db.DB, "slots", 10)
	start(t, w)
	waitFor(t, 5*time.Second, "two handlers running", func() bool { return running.Load() == 2 })
	time.Sleep(100 * time.Millisecond) // several polls with no free slot
	if n := countRows(t, db, "status='PROCESSING'"); n != 2 {
		t.Fatalf("%d rows PROCESSING with 2 dispatch slots busy, want 2: a claim must not take more rows than free slots", n)
	}
	obs.mu.Lock()
	busyClaim := obs.maxClaim
	obs.mu.Unlock()
	if busyClaim > 2 {
		t.Fatalf("largest claim %d before any handler finished, want <= 2 (no handler duration known: no prefetch)", busyClaim)
	}
	close(release)
	waitFor(t, 5*time.Second, "all SENT", func() bool { return countRows(t, db, "status='SENT'") == 10 })
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if peak.Load() > 2 || obs.handled[OutcomeSent] != 10 {
		t.Fatalf("peak concurrency %d, sent %d; want <= 2, 10", peak.Load(), obs.handled[OutcomeSent])
	}
}

// Fast handlers let a claim take more rows than free slots (prefetch), so claims stay large,
// while handler concurrency still never exceeds Concurrency and each message runs once.
func TestPrefetchWithFastHandlers(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	obs := &claimObserver{}
	c := newCalls()
	var running, peak atomic.Int64
	r := NewRouter()
	r.Handle("prefetch", Policy{}, func(_ context.Context, p json.RawMessage, d Delivery) error {
		peak.Store(max(peak.Load(), running.Add(1)))
		defer running.Add(-1)
		c.add(d, p)
		return nil
	})
	w := newTestWorker(t, db.DB, r, Config{Concurrency: 2, BatchSize: 50, Observer: obs})
	ids := enqueueN(t, db.DB, "prefetch", 400)
	start(t, w)
	waitFor(t, 20*time.Second, "all SENT", func() bool { return countRows(t, db, "status='SENT'") == 400 })
	for _, id := range ids {
		if n := c.of(id); n != 1 {
			t.Fatalf("message %d handled %d times, want 1", id, n)
		}
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if peak.Load() > 2 {
		t.Fatalf("peak handler concurrency %d, want <= Concurrency 2", peak.Load())
	}
	if obs.maxClaim <= 2 {
		t.Fatalf("largest claim %d with 400 due rows and no-op handlers, want > 2 (prefetch)", obs.maxClaim)
	}
}

// A prefetched row that waited so long for a slot that its handler could outlive the lease is
// given back unhandled (PENDING, due now) rather than run where a reclaim could run it twice.
func TestPrefetchedRowGivenBackBeforeLeaseRisk(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	c := newCalls()
	var slow atomic.Bool
	r := NewRouter()
	r.Handle("giveback", Policy{Timeout: 300 * time.Millisecond}, func(_ context.Context, p json.RawMessage, d Delivery) error {
		c.add(d, p)
		if slow.CompareAndSwap(true, false) {
			time.Sleep(900 * time.Millisecond) // ignores its context: keeps the only slot
		}
		return nil
	})
	in := &incidents{}
	w := newTestWorker(t, db.DB, r, Config{Concurrency: 1, BatchSize: 20, StaleAfter: time.Second, Reporter: in})
	start(t, w)
	// Teach the worker that handlers are fast, so the next claim prefetches.
	warm := enqueueN(t, db.DB, "giveback", 30)
	waitFor(t, 10*time.Second, "warm-up SENT", func() bool { return countRows(t, db, "status='SENT'") == len(warm) })
	slow.Store(true)
	ids := enqueueN(t, db.DB, "giveback", 6)
	w.Wake()
	waitFor(t, 15*time.Second, "all SENT", func() bool { return countRows(t, db, "status='SENT'") == len(warm)+len(ids) })
	gaveBack := 0
	for _, id := range ids {
		if n := c.of(id); n != 1 {
			t.Fatalf("message %d handled %d times, want exactly 1", id, n)
		}
		if row := getRow(t, db, id); row.Attempts == 2 && strings.Contains(row.LastError.String, "not handled") {
			gaveBack++
		}
	}
	if gaveBack == 0 {
		t.Fatalf("no prefetched row was given back while the only slot was held 900ms past a 1s lease")
	}
}

func TestStatsAfterWorkerScenario(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	hold := make(chan struct{})
	r := NewRouter()
	r.Handle("sc_ok", Policy{}, func(context.Context, json.RawMessage, Delivery) error { return nil })
	r.Handle("sc_bad", Policy{}, func(context.Context, json.RawMessage, Delivery) error { return Permanent(errors.New("no")) })
	r.Handle("sc_slow", Policy{Timeout: 10 * time.Second}, func(ctx context.Context, _ json.RawMessage, _ Delivery) error {
		select {
		case <-hold:
		case <-ctx.Done():
		}
		return nil
	})
	w := newTestWorker(t, db.DB, r, Config{})
	enqueueN(t, db.DB, "sc_ok", 4)
	enqueueN(t, db.DB, "sc_bad", 2)
	enqueueN(t, db.DB, "sc_slow", 3)
	enqueueN(t, db.DB, "sc_ok", 5, Delay(time.Hour)) // pending, not due
	start(t, w)
	t.Cleanup(func() { close(hold) }) // runs before start's stop: cleanups run last-in first-out
	waitFor(t, 5*time.Second, "scenario settled", func() bool {
		return countRows(t, db, "status='SENT'") == 4 && countRows(t, db, "status='FAILED'") == 2 &&
			countRows(t, db, "status='PROCESSING'") == 3
	})
	s, err := Stats(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if s.Pending != 5 || s.Due != 0 || s.Processing != 3 || s.Stale != 0 || s.Stuck != 0 || s.Failed != 2 {
		t.Errorf("totals %+v, want pending 5 (none due), processing 3, failed 2; SENT rows never counted", s)
	}
	if got := s.ByType["sc_slow"]; got.Processing != 3 {
		t.Errorf("sc_slow %+v, want 3 processing", got)
	}
	if got := s.ByType["sc_bad"]; got.Failed != 2 || got.Pending != 0 {
		t.Errorf("sc_bad %+v, want 2 failed", got)
	}
	if got := s.ByType["sc_ok"]; got.Pending != 5 || got.Due != 0 || got.Failed != 0 || got.Processing != 0 {
		t.Errorf("sc_ok %+v, want only 5 pending, not due", got)
	}
}

func TestRunWithCancelledContextClaimsNothing(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	r := NewRouter()
	r.Handle("precancelled", Policy{}, func(context.Context, json.RawMessage, Delivery) error { return nil })
	w := newTestWorker(t, db.DB, r, Config{})
	id := enqueueN(t, db.DB, "precancelled", 1)[0]
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := w.Run(ctx); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	if r := getRow(t, db, id); r.Status != "PENDING" || r.Attempts != 0 {
		t.Fatalf("row %+v, want untouched: a cancelled Run claims nothing", r)
	}
}

func TestResultRecordedWithin100ms(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	var mu sync.Mutex
	returned := map[MessageID]time.Time{} // database clock when the handler returned
	r := NewRouter()
	r.Handle("flush_latency", Policy{}, func(_ context.Context, _ json.RawMessage, d Delivery) error {
		now := dbNow(t, db)
		mu.Lock()
		returned[d.MessageID] = now
		mu.Unlock()
		return nil
	})
	w := newTestWorker(t, db.DB, r, Config{})
	start(t, w)
	var ids []MessageID
	for i := 0; i < 5; i++ { // one at a time: light load, where a result has no company
		ids = append(ids, enqueueN(t, db.DB, "flush_latency", 1)...)
		time.Sleep(30 * time.Millisecond)
	}
	waitFor(t, 5*time.Second, "all SENT", func() bool { return countRows(t, db, "event_type='flush_latency' AND status='SENT'") == len(ids) })
	mu.Lock()
	defer mu.Unlock()
	// The worker waits at most flushLinger (20ms) before it starts the write; what the write
	// itself takes is the server's. The median must be within 100ms; a single outlier on a
	// loaded CI machine may take longer, but never 500ms.
	var lags []time.Duration
	for _, id := range ids {
		lag := getRow(t, db, id).SentAt.Time.Sub(returned[id])
		if lag < 0 || lag > 500*time.Millisecond {
			t.Errorf("message %d: sent_at %v after the handler returned, want well within 100ms", id, lag)
		}
		lags = append(lags, lag)
	}
	sort.Slice(lags, func(i, j int) bool { return lags[i] < lags[j] })
	if median := lags[len(lags)/2]; median > 100*time.Millisecond {
		t.Errorf("median handler-return-to-sent_at %v, want <= 100ms (all: %v)", median, lags)
	}
	t.Logf("handler return -> sent_at: %v", lags)
}

// A result write that fails for a few seconds (a database hiccup) is retried until it lands,
// instead of leaving the row PROCESSING for its lease and delivering it again.
func TestResultWriteRetriedThroughHiccup(t *testing.T) {
	t.Parallel()
	d, inj, db := faultyDB(t)
	// Six failures in a row: about 3s of backoff, longer than the old four quick tries.
	rule := inj.Add(faultdriver.Rule{Match: `MessageMarkSent`, Err: errors.New("injected: server went away"), Times: 6})
	c := newCalls()
	r := NewRouter()
	r.Handle("hiccup", Policy{}, func(_ context.Context, p json.RawMessage, dl Delivery) error {
		c.add(dl, p)
		return nil
	})
	w := newTestWorker(t, db, r, Config{})
	ids := enqueueN(t, d.DB, "hiccup", 3)
	start(t, w)
	waitFor(t, 20*time.Second, "all SENT", func() bool { return countRows(t, d, "status='SENT'") == len(ids) })
	if rule.Hits() != 6 {
		t.Fatalf("the injected failure fired %d times, want 6", rule.Hits())
	}
	for _, id := range ids {
		if n := c.of(id); n != 1 {
			t.Fatalf("message %d handled %d times, want 1 (the write was retried, not left to the lease)", id, n)
		}
	}
}

// While a backlog drains, claims start where the last one ended (seek) instead of at the front
// of the claim index. A row due before that point, here an enqueue whose transaction commits
// after the worker has passed its position, must still be found by the periodic scan from the
// front, long before the backlog is gone.
func TestClaimSeekStillFindsRowsDueEarlier(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	c := newCalls()
	var late atomic.Int64 // the late row's id
	handledBeforeLate := atomic.Int64{}
	handledBeforeLate.Store(-1)
	r := NewRouter()
	r.Handle("seek", Policy{}, func(_ context.Context, p json.RawMessage, d Delivery) error {
		n := c.add(d, p)
		if n == 1 && int64(d.MessageID) == late.Load() {
			handledBeforeLate.Store(int64(c.total() - 1))
		}
		time.Sleep(3 * time.Millisecond) // about 5,000 msg/s with 16 slots: the drain takes over a second
		return nil
	})
	const before, after = 1000, 5000
	enqueueN(t, db.DB, "seek", before)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck // committed below; Rollback after Commit is ErrTxDone
	id, err := Enqueue(ctx, tx, Message{EventType: "seek", Payload: []byte(`{"late":true}`)})
	if err != nil {
		t.Fatal(err)
	}
	late.Store(int64(id))
	enqueueN(t, db.DB, "seek", after) // due after the late row, committed before it

	w := newTestWorker(t, db.DB, r, Config{})
	start(t, w)
	waitFor(t, 20*time.Second, "2,000 handled", func() bool { return c.total() >= 2000 })
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "all SENT", func() bool { return countRows(t, db, "status='SENT'") == before+after+1 })
	if got := c.total(); got != before+after+1 {
		t.Fatalf("%d handler calls, want %d (one each)", got, before+after+1)
	}
	// Found by a scan from the front within rescanEvery, not only once the backlog ran out.
	if hb := handledBeforeLate.Load(); hb < 0 || hb > before+after-1500 {
		t.Fatalf("late row handled after %d others, want it found while at least 1,500 of %d were still due", hb, before+after)
	}
}

// A claim locks its candidates by primary key. When another open claim holds all of them, it
// must not wait and must not come back empty while other rows are due: it reads the next
// window of candidates.
func TestClaimPassesRowsAnotherClaimHolds(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	r := NewRouter()
	r.Handle("skip", Policy{}, func(context.Context, json.RawMessage, Delivery) error { return nil })
	a := newTestWorker(t, db.Open(t), r, Config{})
	b := newTestWorker(t, db.Open(t), r, Config{})
	enqueueN(t, db.DB, "skip", 30)
	inClaim, release := make(chan struct{}), make(chan struct{})
	a.afterClaimSelect = func() {
		close(inClaim)
		<-release
	}
	aGot := make(chan []claimed, 1)
	go func() {
		got, _, err := a.claim(ctx, 10, claimPos{})
		if err != nil {
			t.Error(err)
		}
		aGot <- got
	}()
	<-inClaim
	// a holds the 10 oldest rows. b's 5 candidates are all among them.
	bctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	bGot, _, err := b.claim(bctx, 5, claimPos{})
	close(release)
	if err != nil {
		t.Fatalf("claim while another claim holds its candidates: %v", err)
	}
	held := <-aGot
	if len(held) != 10 || len(bGot) != 5 {
		t.Fatalf("claims got %d and %d rows, want 10 and 5", len(held), len(bGot))
	}
	seen := map[MessageID]bool{}
	for _, m := range append(held, bGot...) {
		if seen[m.id] {
			t.Fatalf("message %d claimed by both", m.id)
		}
		seen[m.id] = true
	}
	if n := countRows(t, db, "status='PROCESSING'"); n != 15 {
		t.Fatalf("%d rows PROCESSING, want 15", n)
	}
}

// A claim that stays open (a hung worker, an admin's SELECT ... FOR UPDATE) holding the oldest
// rows must not stop other workers: once every candidate window is held, the claim falls back
// to the index scan, which skips held rows wherever they are.
func TestOpenClaimOnOldestRowsDoesNotStopOthers(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	c := newCalls()
	r := NewRouter()
	r.Handle("held", Policy{}, func(_ context.Context, p json.RawMessage, d Delivery) error {
		c.add(d, p)
		return nil
	})
	hung := newTestWorker(t, db.Open(t), r, Config{})
	enqueueN(t, db.DB, "held", 1000)
	inClaim, release := make(chan struct{}), make(chan struct{})
	hung.afterClaimSelect = func() {
		close(inClaim)
		<-release
	}
	done := make(chan error, 1)
	go func() {
		_, _, err := hung.claim(ctx, 100, claimPos{})
		done <- err
	}()
	<-inClaim
	defer func() {
		close(release)
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	w := newTestWorker(t, db.Open(t), r, Config{}) // Concurrency 16: 3 windows of 32 < 100 held rows
	start(t, w)
	// Well inside claimTimeout (10 s), after which the held claim would give its rows up anyway.
	waitFor(t, 5*time.Second, "the 900 rows not held handled", func() bool { return c.total() >= 900 })
	if n := w.claimFallbacks.Load(); n == 0 {
		t.Fatal("no claim fell back to the index scan, yet every window was held")
	}
}

// Rows often share a next_attempt_at (Retry and reclaim set whole batches to one instant). A
// claim whose first window is held must still move past it: windows advance by (due, id).
func TestClaimWindowsAdvancePastTiedDueTimes(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	r := NewRouter()
	r.Handle("tie", Policy{}, func(context.Context, json.RawMessage, Delivery) error { return nil })
	enqueueN(t, db.DB, "tie", 300)
	db.MustExec(t, "UPDATE outbox_messages SET next_attempt_at = '2026-01-01 00:00:00'")
	var holders []chan struct{}
	var held []claimed
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		w := newTestWorker(t, db.Open(t), r, Config{})
		in, release := make(chan struct{}), make(chan struct{})
		w.afterClaimSelect = func() { close(in); <-release }
		holders = append(holders, release)
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, _, err := w.claim(ctx, 10, claimPos{})
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			held = append(held, got...)
			mu.Unlock()
		}()
		<-in
	}
	third := newTestWorker(t, db.Open(t), r, Config{})
	got, _, err := third.claim(ctx, 10, claimPos{})
	for _, release := range holders {
		close(release)
	}
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 10 || len(held) != 20 {
		t.Fatalf("claims got %d (third) and %d (the two held), want 10 and 20", len(got), len(held))
	}
	seen := map[MessageID]bool{}
	for _, m := range append(held, got...) {
		if seen[m.id] {
			t.Fatalf("message %d claimed twice", m.id)
		}
		seen[m.id] = true
	}
	if n := third.claimFallbacks.Load(); n != 0 {
		t.Fatalf("the third claim fell back to the index scan %d times; its second window should have had free rows", n)
	}
}

// logRecords keeps the records a logger writes, for tests about what the worker logs.
type logRecords struct {
	mu  sync.Mutex
	all []slog.Record
}

func (l *logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecords) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logRecords) WithGroup(string) slog.Handler            { return l }
func (l *logRecords) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all = append(l.all, r.Clone())
	return nil
}

// errorLines returns the messages of the error-level records, with their kind attribute if any.
func (l *logRecords) errorLines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, r := range l.all {
		if r.Level < slog.LevelError {
			continue
		}
		line := r.Message
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "kind" {
				line += " kind=" + a.Value.String()
			}
			return true
		})
		out = append(out, line)
	}
	return out
}

// find returns the attributes of the first record with message msg.
func (l *logRecords) find(msg string) (map[string]string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.all {
		if r.Message == msg {
			attrs := map[string]string{}
			r.Attrs(func(a slog.Attr) bool {
				attrs[a.Key] = a.Value.String()
				return true
			})
			return attrs, true
		}
	}
	return nil, false
}

// Log-based alerting pages on error lines: every incident must be exactly one, with the default
// Reporter (which writes it) and with a custom one (the worker writes it beside the call).
func TestEachIncidentIsOneErrorLine(t *testing.T) {
	t.Parallel()
	for _, custom := range []bool{false, true} {
		name := map[bool]string{false: "default_reporter", true: "custom_reporter"}[custom]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := migrated(t)
			logs := &logRecords{}
			inc := &incidents{}
			cfg := Config{Logger: slog.New(logs), StaleAfter: time.Minute, ShutdownTimeout: 100 * time.Millisecond}
			if custom {
				cfg.Reporter = inc
			}
			release := make(chan struct{})
			t.Cleanup(func() { close(release) })
			r := NewRouter()
			r.Handle("ignores_ctx", Policy{Timeout: 100 * time.Millisecond}, func(context.Context, json.RawMessage, Delivery) error {
				<-release // ignores its context: hung after its timeout, abandoned at shutdown
				return nil
			})
			w := newTestWorker(t, db.DB, r, cfg)

			// Stuck: one watch pass over a row claimed 10s ago under a 1s lease. (The worker's own
			// lease is long, so the hung row is not reclaimed and hung again while the test runs.)
			id := enqueueN(t, db.DB, "other_type", 1)[0]
			db.MustExec(t, "UPDATE outbox_messages SET status='PROCESSING', attempts=1, claim_token='t', claimed_at=UTC_TIMESTAMP(6) - INTERVAL 10 SECOND, reclaim_after=UTC_TIMESTAMP(6) - INTERVAL 9 SECOND WHERE id = ?", int64(id))
			if n, err := w.watchOnce(context.Background()); err != nil || n != 1 {
				t.Fatalf("watchOnce = %d, %v; want 1 stuck row", n, err)
			}
			want := []string{"outboxgen incident kind=stuck"}
			if got := logs.errorLines(); !slices.Equal(got, want) {
				t.Fatalf("error lines after one stuck sighting: %q, want %q", got, want)
			}

			// HandlerHung twice: past its timeout, then abandoned at shutdown.
			stop := start(t, w)
			enqueueN(t, db.DB, "ignores_ctx", 1)
			waitFor(t, 5*time.Second, "handler_hung error line", func() bool { return len(logs.errorLines()) == 2 })
			stop()
			want = append(want, "outboxgen incident kind=handler_hung", "outboxgen incident kind=handler_hung")
			if got := logs.errorLines(); !slices.Equal(got, want) {
				t.Fatalf("error lines: %q, want %q", got, want)
			}
			if custom && (inc.count(incident.Stuck) != 1 || inc.count(incident.HandlerHung) != 2) {
				t.Fatalf("custom Reporter got %d stuck and %d handler_hung, want 1 and 2", inc.count(incident.Stuck), inc.count(incident.HandlerHung))
			}
		})
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

// Run's doc promises that a database outage does not end it: failures are logged and claims
// resume once the database answers.
func TestRunSurvivesDatabaseOutage(t *testing.T) {
	t.Parallel()
	d, inj, db := faultyDB(t)
	logs := &logRecords{}
	r := NewRouter()
	r.Handle("outage", Policy{}, func(context.Context, json.RawMessage, Delivery) error { return nil })
	w := newTestWorker(t, db, r, Config{Logger: slog.New(logs), ReclaimInterval: 50 * time.Millisecond})

	down := inj.Add(faultdriver.Rule{Match: `.`, Err: errors.New("injected: connection refused")})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx) }()
	ids := enqueueN(t, d.DB, "outage", 3)
	waitFor(t, 5*time.Second, "claim, reclaim and stuck watch failures logged", func() bool {
		got := strings.Join(logs.errorLines(), "|")
		return strings.Contains(got, "outbox claim failed") && strings.Contains(got, "outbox reclaim failed") && strings.Contains(got, "outbox stuck watch failed")
	})
	select {
	case err := <-errc:
		t.Fatalf("Run returned %v while the database was down, want it to keep going", err)
	case <-time.After(200 * time.Millisecond):
	}
	if n := countRows(t, d, "status='PENDING'"); n != len(ids) {
		t.Fatalf("%d PENDING rows while the database was down, want %d", n, len(ids))
	}

	down.Remove()
	waitFor(t, 5*time.Second, "all SENT after the database came back", func() bool { return countRows(t, d, "status='SENT'") == len(ids) })
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("Run returned %v after cancel, want nil", err)
	}
}
