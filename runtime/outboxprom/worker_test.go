package outboxprom_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/outboxgen/outboxgen/runtime/incident"
	"github.com/outboxgen/outboxgen/runtime/outbox"
	"github.com/outboxgen/outboxgen/runtime/outboxprom"
	"github.com/outboxgen/outboxgen/runtime/outboxtest/testdb"
)

// Integration tests: a real worker on the real server (OUTBOX_TEST_DSN; skipped without it)
// processes a known mix, and the metrics must say exactly what happened.

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func enqueue(t *testing.T, db *testdb.DB, eventType string, opts ...outbox.EnqueueOption) outbox.MessageID {
	t.Helper()
	id, err := outbox.Enqueue(context.Background(), db, outbox.Message{EventType: eventType, Payload: json.RawMessage(`{}`)}, append(opts, outbox.Standalone())...)
	if err != nil {
		t.Fatalf("enqueue %s: %v", eventType, err)
	}
	return id
}

// runWorker runs a worker on db with r and cfg, whose Observer is obs, until done() holds,
// then stops it and waits for Run to return. done is checked after each claim the worker
// reports to obs, so a check follows every poll; it fails the test if done does not hold
// within 30s.
func runWorker(t *testing.T, db *sql.DB, r *outbox.Router, cfg outbox.Config, obs *outboxprom.Observer, done func() bool) {
	t.Helper()
	w, polls := newWorker(t, db, r, cfg, obs)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx) }()
	timeout := time.NewTimer(30 * time.Second)
	defer timeout.Stop()
	for !done() {
		select {
		case <-polls:
		case <-timeout.C:
			cancel()
			<-errc
			t.Fatal("the worker did not finish the scripted mix within 30s")
		}
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// newWorker builds a worker with obs as its Observer, through a wrapper that also reports each
// claim (each poll of the worker) on the returned channel, which holds one report and drops
// the rest until it is read.
func newWorker(t *testing.T, db *sql.DB, r *outbox.Router, cfg outbox.Config, obs *outboxprom.Observer) (*outbox.Worker, <-chan struct{}) {
	t.Helper()
	p := polled{obs, make(chan struct{}, 1)}
	cfg.Observer = p
	w, err := outbox.NewWorker(db, r, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return w, p.polls
}

// polled is obs that also reports each claim on polls.
type polled struct {
	*outboxprom.Observer
	polls chan struct{}
}

func (p polled) Claimed(n int, d time.Duration) {
	p.Observer.Claimed(n, d)
	select {
	case p.polls <- struct{}{}:
	default:
	}
}

func statsOf(t *testing.T, db *testdb.DB) outbox.Snapshot {
	t.Helper()
	s, err := outbox.Stats(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The known mix: 3 welcome_email sent at once, 1 flaky retried once then sent, 1 doomed failed
// permanently, and 1 welcome_email left PROCESSING by a "dead worker" with an expired lease,
// which the worker reclaims and then sends.
func TestWorkerMixMetrics(t *testing.T) {
	t.Parallel()
	db := testdb.Migrated(t)
	for i := 0; i < 3; i++ {
		enqueue(t, db, "welcome_email")
	}
	enqueue(t, db, "flaky")
	enqueue(t, db, "doomed")
	db.MustExec(t, `INSERT INTO outbox_messages (event_type, payload, status, attempts, max_attempts,
		next_attempt_at, claimed_at, reclaim_after, claim_token, created_at)
		VALUES ('welcome_email', '{}', 'PROCESSING', 1, 10, UTC_TIMESTAMP(6),
		TIMESTAMPADD(SECOND, -400, UTC_TIMESTAMP(6)), TIMESTAMPADD(SECOND, -100, UTC_TIMESTAMP(6)), 'dead', UTC_TIMESTAMP(6))`)

	var flakyCalls atomic.Int32
	fast := outbox.Policy{Backoff: outbox.Backoff{Initial: time.Millisecond, Max: time.Millisecond}}
	r := outbox.NewRouter()
	r.Handle("welcome_email", fast, func(context.Context, json.RawMessage, outbox.Delivery) error { return nil })
	r.Handle("flaky", fast, func(context.Context, json.RawMessage, outbox.Delivery) error {
		if flakyCalls.Add(1) == 1 {
			return errors.New("smtp: 421 try again later")
		}
		return nil
	})
	r.Handle("doomed", fast, func(context.Context, json.RawMessage, outbox.Delivery) error {
		return outbox.Permanent(errors.New("mailbox does not exist"))
	})

	obs := outboxprom.NewObserver()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(obs, outboxprom.NewStatsCollector(db))
	cfg := outbox.Config{PollInterval: 20 * time.Millisecond, ReclaimInterval: 20 * time.Millisecond, Logger: quietLogger()}
	runWorker(t, db.DB, r, cfg, obs, func() bool {
		s := statsOf(t, db)
		return s.Pending == 0 && s.Processing == 0 && s.Failed == 1
	})

	want := `
# HELP outbox_claimed_total Rows claimed by this process's workers: by a claim transaction, or handed off by InTx already claimed (outbox_handed_off_total).
# TYPE outbox_claimed_total counter
outbox_claimed_total 7
# HELP outbox_sent_total Handler calls that ended with the message SENT.
# TYPE outbox_sent_total counter
outbox_sent_total{event_type="flaky"} 1
outbox_sent_total{event_type="welcome_email"} 4
# HELP outbox_retried_total Handler calls that failed with attempts left: the message went back to PENDING with a backoff.
# TYPE outbox_retried_total counter
outbox_retried_total{event_type="flaky"} 1
# HELP outbox_failed_total Handler calls that ended with the message FAILED (permanent error, attempts exhausted, undecodable payload).
# TYPE outbox_failed_total counter
outbox_failed_total{event_type="doomed"} 1
# HELP outbox_reclaimed_total PROCESSING rows whose lease expired, moved back to PENDING (or FAILED when exhausted) by this process's reclaim passes.
# TYPE outbox_reclaimed_total counter
outbox_reclaimed_total 1
# HELP outbox_stuck_seen_total Rows seen PROCESSING past 3x their lease, summed over watch passes. Any increase means nobody is reclaiming.
# TYPE outbox_stuck_seen_total counter
outbox_stuck_seen_total 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"outbox_claimed_total", "outbox_sent_total", "outbox_retried_total", "outbox_failed_total",
		"outbox_reclaimed_total", "outbox_stuck_seen_total"); err != nil {
		t.Error(err)
	}
	for _, c := range []struct {
		eventType, outcome string
		n                  uint64
	}{
		{"welcome_email", "sent", 4}, {"flaky", "retried", 1}, {"flaky", "sent", 1}, {"doomed", "failed", 1},
	} {
		if got := histogramCount(t, reg, "outbox_handler_duration_seconds",
			map[string]string{"event_type": c.eventType, "outcome": c.outcome}); got != c.n {
			t.Errorf("handler duration %s/%s: %d observations, want %d", c.eventType, c.outcome, got, c.n)
		}
	}
	if n := testutil.CollectAndCount(obs, "outbox_handler_duration_seconds"); n != 4 {
		t.Errorf("handler duration series = %d, want 4", n)
	}
	// flaky's retry needs a second claim after the first; the reclaimed row may share either.
	if got := histogramCount(t, reg, "outbox_claim_duration_seconds", nil); got < 2 {
		t.Errorf("claim duration observations = %d, want at least 2", got)
	}

	// The gauges, read on this scrape: only the FAILED doomed row is left (SENT rows never count).
	wantGauges := `
# HELP outbox_messages Rows by event type and status (PENDING, PROCESSING, FAILED, CANCELLED; never SENT).
# TYPE outbox_messages gauge
outbox_messages{event_type="doomed",status="CANCELLED"} 0
outbox_messages{event_type="doomed",status="FAILED"} 1
outbox_messages{event_type="doomed",status="PENDING"} 0
outbox_messages{event_type="doomed",status="PROCESSING"} 0
# HELP outbox_due_messages PENDING rows whose next_attempt_at has passed: waiting only for a worker.
# TYPE outbox_due_messages gauge
outbox_due_messages 0
# HELP outbox_oldest_pending_age_seconds Age of the oldest PENDING row by the database clock, 0 when none: the delivery lag, delayed and backed-off rows included.
# TYPE outbox_oldest_pending_age_seconds gauge
outbox_oldest_pending_age_seconds 0
# HELP outbox_oldest_due_age_seconds How long the longest-waiting due PENDING row has been claimable, 0 when none: grows when nobody claims.
# TYPE outbox_oldest_due_age_seconds gauge
outbox_oldest_due_age_seconds 0
# HELP outbox_stale_messages PROCESSING rows past their lease (reclaim_after); a live worker reclaims them.
# TYPE outbox_stale_messages gauge
outbox_stale_messages 0
# HELP outbox_stuck_messages PROCESSING rows past 3x their lease: nobody is reclaiming them. Alert on > 0.
# TYPE outbox_stuck_messages gauge
outbox_stuck_messages 0
# HELP outbox_held_ordering_keys Ordering keys whose head message cannot be handled now (FAILED, or waiting for a retry or a Delay) while others of the key wait behind it.
# TYPE outbox_held_ordering_keys gauge
outbox_held_ordering_keys 0
# HELP outbox_oldest_held_age_seconds How long the longest-held ordering key's first waiting message has waited, 0 when none. A FAILED head holds its key until retry or purge.
# TYPE outbox_oldest_held_age_seconds gauge
outbox_oldest_held_age_seconds 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(wantGauges),
		"outbox_messages", "outbox_due_messages", "outbox_oldest_pending_age_seconds",
		"outbox_oldest_due_age_seconds", "outbox_stale_messages", "outbox_stuck_messages",
		"outbox_held_ordering_keys", "outbox_oldest_held_age_seconds"); err != nil {
		t.Error(err)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

// A worker that does not reclaim (DisableReclaim: another process is supposed to) still
// watches, and each stuck sighting reaches the observer and the incident reporter.
func TestWorkerStuckSeen(t *testing.T) {
	t.Parallel()
	db := testdb.Migrated(t)
	// Claimed 20 minutes ago with a 5 minute lease: past 3x, nobody reclaimed it.
	db.MustExec(t, `INSERT INTO outbox_messages (event_type, payload, status, attempts, max_attempts,
		next_attempt_at, claimed_at, reclaim_after, claim_token, created_at)
		VALUES ('welcome_email', '{}', 'PROCESSING', 1, 10, UTC_TIMESTAMP(6),
		TIMESTAMPADD(MINUTE, -20, UTC_TIMESTAMP(6)), TIMESTAMPADD(MINUTE, -15, UTC_TIMESTAMP(6)), 'gone', UTC_TIMESTAMP(6))`)
	r := outbox.NewRouter()
	r.Handle("welcome_email", outbox.Policy{}, func(context.Context, json.RawMessage, outbox.Delivery) error { return nil })
	obs := outboxprom.NewObserver()
	var mu sync.Mutex
	var incidents []incident.Incident
	cfg := outbox.Config{
		PollInterval: 20 * time.Millisecond, ReclaimInterval: 20 * time.Millisecond, DisableReclaim: true,
		Logger: quietLogger(),
		Reporter: incident.Func(func(_ context.Context, in incident.Incident) {
			mu.Lock()
			defer mu.Unlock()
			incidents = append(incidents, in)
		}),
	}
	runWorker(t, db.DB, r, cfg, obs, func() bool { return testutil.ToFloat64(obsStuck(obs)) >= 2 })
	mu.Lock()
	defer mu.Unlock()
	if len(incidents) < 2 || incidents[0].Kind != incident.Stuck {
		t.Errorf("incidents = %+v; want a Stuck report per sighting", incidents)
	}
	// Each pass saw exactly the one row: the counter is a whole number of sightings of it.
	if got := testutil.ToFloat64(obsStuck(obs)); got != float64(int(got)) || got < 2 {
		t.Errorf("outbox_stuck_seen_total = %v, want a whole number >= 2", got)
	}

	stats := outboxprom.NewStatsCollector(db)
	want := `
# HELP outbox_stuck_messages PROCESSING rows past 3x their lease: nobody is reclaiming them. Alert on > 0.
# TYPE outbox_stuck_messages gauge
outbox_stuck_messages 1
# HELP outbox_stale_messages PROCESSING rows past their lease (reclaim_after); a live worker reclaims them.
# TYPE outbox_stale_messages gauge
outbox_stale_messages 1
`
	if err := testutil.CollectAndCompare(stats, strings.NewReader(want), "outbox_stuck_messages", "outbox_stale_messages"); err != nil {
		t.Error(err)
	}
}

// obsStuck collects only outbox_stuck_seen_total from the observer.
func obsStuck(obs *outboxprom.Observer) prometheus.Collector {
	return filtered{obs, "outbox_stuck_seen_total"}
}

type filtered struct {
	c    prometheus.Collector
	name string
}

func (f filtered) Describe(ch chan<- *prometheus.Desc) { f.c.Describe(ch) }
func (f filtered) Collect(ch chan<- prometheus.Metric) {
	all := make(chan prometheus.Metric)
	go func() { f.c.Collect(all); close(all) }()
	for m := range all {
		if strings.Contains(m.Desc().String(), `fqName: "`+f.name+`"`) {
			ch <- m
		}
	}
}

// Depth, due and lag from the table, without a worker: the numbers outbox.Stats reports.
func TestStatsCollectorGauges(t *testing.T) {
	t.Parallel()
	db := testdb.Migrated(t)
	for i := 0; i < 2; i++ {
		enqueue(t, db, "welcome_email")
	}
	enqueue(t, db, "welcome_email", outbox.Delay(time.Hour))
	old := enqueue(t, db, "invoice_paid")
	db.MustExec(t, "UPDATE outbox_messages SET created_at = TIMESTAMPADD(MINUTE, -30, created_at) WHERE id = ?", old)
	db.MustExec(t, `INSERT INTO outbox_messages (event_type, payload, status, attempts, max_attempts,
		next_attempt_at, created_at, sent_at) VALUES ('welcome_email', '{}', 'SENT', 1, 10,
		UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))`)

	c := outboxprom.NewStatsCollector(db, outboxprom.WithTimeout(2*time.Second))
	want := `
# HELP outbox_messages Rows by event type and status (PENDING, PROCESSING, FAILED, CANCELLED; never SENT).
# TYPE outbox_messages gauge
outbox_messages{event_type="invoice_paid",status="CANCELLED"} 0
outbox_messages{event_type="invoice_paid",status="FAILED"} 0
outbox_messages{event_type="invoice_paid",status="PENDING"} 1
outbox_messages{event_type="invoice_paid",status="PROCESSING"} 0
outbox_messages{event_type="welcome_email",status="CANCELLED"} 0
outbox_messages{event_type="welcome_email",status="FAILED"} 0
outbox_messages{event_type="welcome_email",status="PENDING"} 3
outbox_messages{event_type="welcome_email",status="PROCESSING"} 0
# HELP outbox_due_messages PENDING rows whose next_attempt_at has passed: waiting only for a worker.
# TYPE outbox_due_messages gauge
outbox_due_messages 3
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "outbox_messages", "outbox_due_messages"); err != nil {
		t.Error(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var age float64 = -1
	for _, mf := range mfs {
		if mf.GetName() == "outbox_oldest_pending_age_seconds" {
			age = mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	if age < 1800 || age > 1900 {
		t.Errorf("outbox_oldest_pending_age_seconds = %v, want about 1800 (the invoice_paid row made 30m old)", age)
	}
}

// A scrape whose query fails reports the error instead of serving zeros.
func TestStatsCollectorScrapeError(t *testing.T) {
	t.Parallel()
	db := testdb.New(t) // no schema: the Stats query fails (table missing)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(outboxprom.NewStatsCollector(db))
	_, err := reg.Gather()
	if err == nil || !strings.Contains(err.Error(), "outbox: Stats") || !strings.Contains(err.Error(), "doesn't exist") {
		t.Fatalf("Gather error = %v; want the Stats failure (missing outbox_messages) reported", err)
	}
	if n, err := testutil.GatherAndCount(reg); err == nil {
		t.Errorf("GatherAndCount = %d, nil; want the error to reach the caller", n)
	}
}

// Messages InTx hands off to a worker of the process pass through no claim transaction: the
// Observer counts them as claimed (and handed off), so outbox_claimed_total is every row taken.
func TestWorkerHandoffMetrics(t *testing.T) {
	t.Parallel()
	db := testdb.Migrated(t)
	const n = 5
	handled := make(chan struct{}, n)
	r := outbox.NewRouter()
	r.Handle("welcome_email", outbox.Policy{}, func(context.Context, json.RawMessage, outbox.Delivery) error {
		select {
		case handled <- struct{}{}:
		default: // a call past n: the counters below tell
		}
		return nil
	})
	obs := outboxprom.NewObserver()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(obs)
	// Claims once at start, then only when InTx wakes it for a message it did not take.
	w, polls := newWorker(t, db.DB, r, outbox.Config{PollInterval: time.Hour, MinPollInterval: time.Hour, Logger: quietLogger()}, obs)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx) }()
	timeout := time.After(30 * time.Second)
	select { // past the first claim
	case <-polls:
	case <-timeout:
		t.Fatal("the worker made no claim within 30s")
	}
	for i := 0; i < n; i++ {
		if err := outbox.InTx(context.Background(), db.DB, func(tx *sql.Tx) error {
			_, err := outbox.Enqueue(context.Background(), tx, outbox.Message{EventType: "welcome_email", Payload: json.RawMessage(`{}`)})
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < n; i++ {
		select {
		case <-handled:
		case <-timeout:
			t.Fatalf("%d of %d messages handled within 30s", i, n)
		}
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("Run: %v", err)
	}
	claimed := gatherValue(t, reg, "outbox_claimed_total")
	handedOff := gatherValue(t, reg, "outbox_handed_off_total")
	if claimed != n || handedOff < 1 || handedOff > n {
		t.Errorf("outbox_claimed_total %v, outbox_handed_off_total %v; want %d claimed, most of them handed off", claimed, handedOff, n)
	}
}

// gatherValue is the value of the single unlabelled counter name in reg.
func gatherValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no counter %s", name)
	return 0
}
