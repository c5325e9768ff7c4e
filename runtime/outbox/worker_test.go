package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/internal/faultdriver"
	"github.com/outboxgen/outboxgen/internal/testutil"
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
	sig := signals(t, w)
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
	testutil.Eventually(t, 5*time.Second, "both messages SENT", func() bool {
		return statusOf(t, db, keyed) == "SENT" && statusOf(t, db, unkeyed) == "SENT"
	})
	sig.awaitClaims(3) // a few more polls: nothing else may arrive
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
	testutil.Eventually(t, 60*time.Second, "3000 SENT", func() bool { return countRows(t, db, "status='SENT'") == total })
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
	testutil.Eventually(t, 10*time.Second, "reclaimed and delivered by the other worker", func() bool { return statusOf(t, db, id) == "SENT" })
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

func TestShutdownLetsInFlightFinishAndRecords(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	inc := &incidents{}
	started := make(chan MessageID, 3)
	r := NewRouter()
	// Finishes 300ms after shutdown begins, ignoring ctx: its result must still be recorded.
	slowRelease := make(chan struct{})
	r.Handle("slow_ok", Policy{Timeout: time.Second}, func(ctx context.Context, p json.RawMessage, d Delivery) error {
		started <- d.MessageID
		<-slowRelease
		return nil
	})
	// Waits for its context: cancelled at ShutdownTimeout, then given back.
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
	time.AfterFunc(300*time.Millisecond, func() { close(slowRelease) })
	stop()
	took := time.Since(began)
	if took < 600*time.Millisecond || took > 600*time.Millisecond+shutdownGrace+2*time.Second {
		t.Errorf("Run returned %v after cancel, want about ShutdownTimeout (600ms) plus the grace", took)
	}
	if s := getRow(t, db, slow); s.Status != "SENT" {
		t.Errorf("in-flight handler that finished during shutdown: %s, want SENT", s.Status)
	}
	// Cut off by the shutdown, not by its own fault: its attempt is given back and it is due at once.
	if s := getRow(t, db, waits); s.Status != "PENDING" || s.Attempts != 0 || s.NextAttemptAt.After(dbNow(t, db)) {
		t.Errorf("handler cancelled at ShutdownTimeout: %+v, want PENDING, attempts 0, due now", s)
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
	w := newTestWorker(t, db.DB, r, Config{PollInterval: time.Minute, MinPollInterval: time.Minute})
	sig := signals(t, w)
	start(t, w)
	sig.claimed.WaitOrTimeout() // the first (empty) claim; the worker now waits a minute
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
	testutil.Eventually(t, 5*time.Second, "scenario settled", func() bool {
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
			testutil.Eventually(t, 5*time.Second, "handler_hung error line", func() bool { return len(logs.errorLines()) == 2 })
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

// Run's doc promises that a database outage does not end it: failures are logged and claims
// resume once the database answers.
func TestRunSurvivesDatabaseOutage(t *testing.T) {
	t.Parallel()
	d, inj, db := faultyDB(t)
	logs := &logRecords{}
	r := NewRouter()
	r.Handle("outage", Policy{}, func(context.Context, json.RawMessage, Delivery) error { return nil })
	w := newTestWorker(t, db, r, Config{Logger: slog.New(logs), ReclaimInterval: 50 * time.Millisecond})
	sig := signals(t, w)

	claims := inj.Add(faultdriver.Rule{Match: `name: MessageClaim`, Err: errors.New("injected: connection refused")})
	down := inj.Add(faultdriver.Rule{Match: `.`, Err: errors.New("injected: connection refused")})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx) }()
	ids := enqueueN(t, d.DB, "outage", 3)
	testutil.Eventually(t, 5*time.Second, "claim, reclaim and stuck watch failures logged", func() bool {
		got := strings.Join(logs.errorLines(), "|")
		return strings.Contains(got, "outbox claim failed") && strings.Contains(got, "outbox reclaim failed") && strings.Contains(got, "outbox stuck watch failed")
	})

	// An outage is logged once per loop and state change, and the claim loop backs off: after
	// a failed claim it waits twice its idle wait, then four times, where it would wait once
	// without the backoff. The first claim seen may have begun before the clear.
	sig.claimed.Clear()
	sig.claimed.WaitOrTimeout()
	began := time.Now()
	for range 2 {
		if got := sig.claimed.WaitOrTimeout(); got != 0 {
			t.Fatalf("a claim took %d rows while the database was down", got)
		}
	}
	idle := w.cfg.MinPollInterval
	if took := time.Since(began); took < 2*idle+4*idle {
		t.Errorf("two failing claims took %s, want at least %s: the claim loop must back off", took, 6*idle)
	}
	select {
	case err := <-errc:
		t.Fatalf("Run returned %v while the database was down, want it to keep going", err)
	default:
	}
	if n := countRows(t, d, "status='PENDING'"); n != len(ids) {
		t.Fatalf("%d PENDING rows while the database was down, want %d", n, len(ids))
	}
	for _, msg := range []string{"outbox claim failed", "outbox reclaim failed", "outbox stuck watch failed"} {
		if n := logs.count(msg); n != 1 {
			t.Errorf("%q logged %d times during the outage, want once", msg, n)
		}
	}

	claims.Remove()
	down.Remove()
	testutil.Eventually(t, 10*time.Second, "all SENT after the database came back", func() bool { return countRows(t, d, "status='SENT'") == len(ids) })
	testutil.Eventually(t, 5*time.Second, "recovery logged", func() bool {
		return logs.count("outbox claim recovered") == 1 && logs.count("outbox reclaim recovered") == 1
	})
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("Run returned %v after cancel, want nil", err)
	}
}
