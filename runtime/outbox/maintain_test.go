package outbox

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/outboxgen/outboxgen/internal/testutil"

	"github.com/outboxgen/outboxgen/internal/faultdriver"
	"github.com/outboxgen/outboxgen/runtime/incident"
)

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
	testutil.Eventually(t, 5*time.Second, "two Stuck incidents (one per watch pass)", func() bool { return inc.count(incident.Stuck) >= 2 })
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
	testutil.Eventually(t, 5*time.Second, "reclaimed rows SENT", func() bool { return countRows(t, db, "status='SENT'") == 2 })
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
		awaitLeaseExpired(t, db.DB, id)
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
	awaitLeaseExpired(t, db.DB, a[0].id)
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

// A reclaim chosen as a deadlock victim (InnoDB rolled it back whole) runs again at once: the
// expired lease is still returned in the same pass, and nothing is logged as a failure. Only a
// transaction that keeps losing, maxDeadlockTries times, is an error. The deadlock is injected
// on the reclaim's UPDATE (a real one needs a claim locking the same rows in the other order at
// that very moment); the statements themselves run on the real server.
func TestReclaimRetriesADeadlockVictim(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	deadlock := &mysql.MySQLError{Number: 1213, Message: "Deadlock found when trying to get lock; try restarting transaction"}
	for _, c := range []struct {
		deadlocks int
		wantErr   bool
	}{
		{1, false},
		{maxDeadlockTries - 1, false},
		{maxDeadlockTries, true},
	} {
		d, inj, db := faultyDB(t)
		r := NewRouter()
		r.Handle("e", Policy{Timeout: 50 * time.Millisecond}, func(context.Context, json.RawMessage, Delivery) error { return nil })
		w := newTestWorker(t, db, r, Config{StaleAfter: 200 * time.Millisecond})
		id := enqueueN(t, db, "e", 1)[0]
		if got, _, err := w.claim(ctx, 1, claimPos{}); err != nil || len(got) != 1 {
			t.Fatalf("claim: %v %v", got, err)
		}
		awaitLeaseExpired(t, d.DB, id)
		rule := inj.Add(faultdriver.Rule{Match: `(?s)UPDATE outbox_messages\s+SET status\s+= IF\(cancelled_at IS NOT NULL, .CANCELLED., IF\(attempts >= max_attempts`, Err: deadlock, Times: c.deadlocks})
		n, err := w.reclaimOnce(ctx)
		if hits := rule.Hits(); hits != c.deadlocks {
			t.Errorf("%d deadlocks: the reclaim's UPDATE was refused %d times, want %d", c.deadlocks, hits, c.deadlocks)
		}
		if c.wantErr {
			if !isDeadlock(err) || n != 0 || statusOf(t, d, id) != "PROCESSING" {
				t.Errorf("%d deadlocks in a row: reclaimOnce = %d, %v, row %s; want the deadlock error and the row untouched", c.deadlocks, n, err, statusOf(t, d, id))
			}
			continue
		}
		if err != nil || n != 1 || statusOf(t, d, id) != "PENDING" {
			t.Errorf("%d deadlock(s), then the real UPDATE: reclaimOnce = %d, %v, row %s; want 1, nil, PENDING", c.deadlocks, n, err, statusOf(t, d, id))
		}
	}
}
