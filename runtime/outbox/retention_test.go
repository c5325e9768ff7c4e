package outbox

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/internal/testutil"
)

// exists reports whether message id is still in the table.
func exists(t testing.TB, db DBTX, id MessageID) bool {
	t.Helper()
	return countRows(t, db, "id = ?", int64(id)) == 1
}

// retentionRouter handles eventType with a handler that must never run: the tests' rows are
// set by hand and none is due.
func retentionRouter(t testing.TB, eventType string) *Router {
	r := NewRouter()
	r.Handle(eventType, Policy{}, func(context.Context, json.RawMessage, Delivery) error {
		t.Errorf("handler ran")
		return nil
	})
	return r
}

// awaitRetained waits for the next pass in which w held the cleaning lock.
func awaitRetained(t testing.TB, s *workerTestSignals) retentionPass {
	t.Helper()
	for {
		if p := s.retained.WaitOrTimeout(); p.Locked {
			return p
		}
	}
}

// A worker deletes the SENT rows of its event types that are past Retention.Sent, and nothing
// else: not a recent SENT row, not another type's, not a PENDING row however old (one delayed
// far into the future has an old created_at and an old enqueue), not a PROCESSING one, not a
// FAILED one (kept by default).
func TestRetentionDeletesOldSentOnly(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ids := enqueueN(t, db.DB, "ret_a", 6)
	other := enqueueN(t, db.DB, "ret_other", 1)
	oldSent, newSent, delayed, processing, failed := ids[0], ids[1], ids[2], ids[3], ids[4]
	setRow(t, db, oldSent, sentSQL, -7200)
	setRow(t, db, ids[5], sentSQL, -7200)
	setRow(t, db, newSent, sentSQL, -600)
	setRow(t, db, other[0], sentSQL, -7200)
	setRow(t, db, delayed, "created_at=TIMESTAMPADD(DAY, -30, UTC_TIMESTAMP(6)), next_attempt_at=TIMESTAMPADD(DAY, 30, UTC_TIMESTAMP(6))")
	setRow(t, db, processing, processingSQL, -7200, 3600)
	setRow(t, db, processing, "created_at=TIMESTAMPADD(DAY, -30, UTC_TIMESTAMP(6)), next_attempt_at=TIMESTAMPADD(DAY, -30, UTC_TIMESTAMP(6))")
	setRow(t, db, failed, failedSQL, "old failure", -86400*30)

	w := newTestWorker(t, db.DB, retentionRouter(t, "ret_a"), Config{ReclaimInterval: 50 * time.Millisecond, Retention: Retention{Sent: time.Hour}})
	s := signals(t, w)
	start(t, w)
	if p := awaitRetained(t, s); p.Sent != 2 || p.Failed != 0 {
		t.Errorf("pass = %+v, want 2 SENT rows deleted", p)
	}
	for _, id := range []MessageID{oldSent, ids[5]} {
		if exists(t, db, id) {
			t.Errorf("old SENT row %d kept", id)
		}
	}
	for what, id := range map[string]MessageID{
		"recent SENT": newSent, "other type's SENT": other[0], "delayed PENDING": delayed,
		"PROCESSING": processing, "FAILED": failed,
	} {
		if !exists(t, db, id) {
			t.Errorf("%s row %d deleted", what, id)
		}
	}
	if st := statusOf(t, db, delayed); st != "PENDING" {
		t.Errorf("delayed row is %s, want PENDING", st)
	}
}

// An ordered message whose queue entry is still there is kept, SENT or FAILED: deleting it
// would release its key. A SENT one with an entry is a row changed by hand (the SENT mark
// deletes the entry in its transaction), which the broken-key repair of a running worker fixes
// first; so the pass runs here on a worker that is not running.
func TestRetentionKeepsQueuedOrderedRows(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	sent := enqueueOrdered(t, db.DB, "ret_q", "k1", 1)
	setRow(t, db, sent, sentSQL, -7200) // by hand: its queue entry stays
	failed := enqueueOrdered(t, db.DB, "ret_q", "k2", 1)
	setRow(t, db, failed, failedSQL, "old", -7200)
	plain := enqueueN(t, db.DB, "ret_q", 1)[0]
	setRow(t, db, plain, sentSQL, -7200)
	w := newTestWorker(t, db.DB, retentionRouter(t, "ret_q"), Config{})
	p, err := w.retainOnce(context.Background(), Retention{Sent: time.Hour, Failed: time.Hour})
	if err != nil || p.Sent != 1 || p.Failed != 0 {
		t.Fatalf("pass = %+v, %v; want only the unordered SENT row deleted", p, err)
	}
	if !exists(t, db, sent) || !exists(t, db, failed) || exists(t, db, plain) {
		t.Errorf("ordered SENT kept %v, ordered FAILED kept %v, unordered SENT kept %v; want true, true, false",
			exists(t, db, sent), exists(t, db, failed), exists(t, db, plain))
	}
}

// Zero Retention is the default: SENT rows go after 24h, FAILED ones stay.
func TestRetentionDefault(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ids := enqueueN(t, db.DB, "ret_def", 3)
	setRow(t, db, ids[0], sentSQL, -25*3600)
	setRow(t, db, ids[1], sentSQL, -23*3600)
	setRow(t, db, ids[2], failedSQL, "old", -365*86400)
	w := newTestWorker(t, db.DB, retentionRouter(t, "ret_def"), Config{ReclaimInterval: 50 * time.Millisecond})
	s := signals(t, w)
	start(t, w)
	awaitRetained(t, s)
	if exists(t, db, ids[0]) || !exists(t, db, ids[1]) || !exists(t, db, ids[2]) {
		t.Errorf("after a pass: 25h SENT kept %v, 23h SENT kept %v, year-old FAILED kept %v; want false, true, true",
			exists(t, db, ids[0]), exists(t, db, ids[1]), exists(t, db, ids[2]))
	}
}

// Retention.Failed > 0 deletes FAILED rows past it, except an ordered head that holds its key.
func TestRetentionFailed(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ids := enqueueN(t, db.DB, "ret_f", 2)
	setRow(t, db, ids[0], failedSQL, "old", -7200)
	setRow(t, db, ids[1], failedSQL, "recent", -600)
	head := enqueueOrdered(t, db.DB, "ret_f", "k", 1)
	behind := enqueueOrdered(t, db.DB, "ret_f", "k", 2)
	setRow(t, db, head, failedSQL, "old head", -7200)
	setRow(t, db, behind, "next_attempt_at=TIMESTAMPADD(DAY, 1, UTC_TIMESTAMP(6))") // not claimed meanwhile
	w := newTestWorker(t, db.DB, retentionRouter(t, "ret_f"), Config{ReclaimInterval: 50 * time.Millisecond, Retention: Retention{Failed: time.Hour}})
	s := signals(t, w)
	start(t, w)
	if p := awaitRetained(t, s); p.Failed != 1 {
		t.Errorf("pass = %+v, want 1 FAILED row deleted", p)
	}
	if exists(t, db, ids[0]) || !exists(t, db, ids[1]) || !exists(t, db, head) {
		t.Errorf("old FAILED kept %v, recent FAILED kept %v, ordered head kept %v; want false, true, true",
			exists(t, db, ids[0]), exists(t, db, ids[1]), exists(t, db, head))
	}
}

// KeepForever keeps; a negative duration other than KeepForever is refused, naming the field.
func TestRetentionValidation(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	r := retentionRouter(t, "ret_v")
	for _, c := range []struct {
		ret  Retention
		want string
	}{
		{Retention{Sent: -2}, "Retention.Sent"},
		{Retention{Failed: -time.Hour}, "Retention.Failed"},
		{Retention{Inbox: -time.Second}, "Retention.Inbox"},
	} {
		_, err := NewWorker(db.DB, r, fastConfig(Config{Retention: c.ret}))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewWorker(%+v) = %v, want an error naming %s", c.ret, err, c.want)
		}
	}
	ids := enqueueN(t, db.DB, "ret_v", 1)
	setRow(t, db, ids[0], sentSQL, -30*86400)
	w := newTestWorker(t, db.DB, r, Config{ReclaimInterval: 20 * time.Millisecond, Retention: Retention{Sent: KeepForever, Failed: KeepForever, Inbox: KeepForever}})
	s := signals(t, w)
	start(t, w)
	for range 3 {
		s.maintained.WaitOrTimeout()
	}
	if !exists(t, db, ids[0]) {
		t.Errorf("Retention.Sent = KeepForever deleted a SENT row")
	}
}

// One worker per database cleans at a time: while another session holds the database's
// cleaning lock, a worker's pass deletes nothing; once it is released, the next pass cleans.
// The lock of another database on the same server does not stop it.
func TestRetentionOneCleanerPerDatabase(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	otherDB := migrated(t)
	ctx := context.Background()
	ids := enqueueN(t, db.DB, "ret_l", 1)
	setRow(t, db, ids[0], sentSQL, -7200)

	// Another database's cleaning lock, held by a session of that database.
	otherConn, err := otherDB.DB.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer otherConn.Close()
	if got, err := q.RetentionLock(ctx, otherConn); err != nil || len(got) != 1 || got[0] != 1 {
		t.Fatalf("lock the other database: %v, %v", got, err)
	}
	// This database's lock, held by a session that is not a worker.
	conn, err := db.DB.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if got, err := q.RetentionLock(ctx, conn); err != nil || len(got) != 1 || got[0] != 1 {
		t.Fatalf("lock: %v, %v", got, err)
	}

	w := newTestWorker(t, db.DB, retentionRouter(t, "ret_l"), Config{ReclaimInterval: 20 * time.Millisecond, Retention: Retention{Sent: time.Hour}})
	s := signals(t, w)
	stop := start(t, w)
	for range 2 {
		if p := s.retained.WaitOrTimeout(); p.Locked || p.Sent != 0 {
			t.Fatalf("pass %+v while another session held the lock", p)
		}
	}
	if !exists(t, db, ids[0]) {
		t.Fatal("row deleted while another session held the lock")
	}
	if err := q.RetentionUnlock(ctx, conn); err != nil {
		t.Fatal(err)
	}
	if p := awaitRetained(t, s); p.Sent != 1 || exists(t, db, ids[0]) {
		t.Errorf("pass after release = %+v, row kept %v; want 1 deleted", p, exists(t, db, ids[0]))
	}
	// The worker releases the lock after each pass: once it stopped, another session takes it.
	// A stop that cancels a pass's statement closes its connection, and the server frees the
	// lock when it sees the connection gone, a moment later.
	stop()
	testutil.Eventually(t, 10*time.Second, "the cleaning lock free after the worker stopped", func() bool {
		got, err := q.RetentionLock(ctx, conn)
		if err != nil || len(got) != 1 || got[0] < 0 {
			t.Fatalf("lock after the worker's pass: %v, %v", got, err)
		}
		return got[0] == 1
	})
}

// A backlog larger than a batch is deleted in one pass, batch after batch.
func TestRetentionBatches(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	const n = 2*retentionBatchStart + 500
	enqueueN(t, db.DB, "ret_b", n)
	db.MustExec(t, "UPDATE outbox_messages SET "+strings.ReplaceAll(sentSQL, "?", "-7200"))
	keep := enqueueN(t, db.DB, "ret_b", 1)
	setRow(t, db, keep[0], sentSQL, -60)
	w := newTestWorker(t, db.DB, retentionRouter(t, "ret_b"), Config{ReclaimInterval: time.Minute, Retention: Retention{Sent: time.Hour}})
	s := signals(t, w)
	start(t, w)
	if p := awaitRetained(t, s); p.Sent != n {
		t.Errorf("pass = %+v, want %d SENT rows deleted", p, n)
	}
	if got := countRows(t, db, "1=1"); got != 1 || !exists(t, db, keep[0]) {
		t.Errorf("%d rows left, want only the recent one", got)
	}
}

type retainedObserver struct {
	NopObserver
	mu sync.Mutex
	n  map[string]int64
}

func (o *retainedObserver) Retained(table string, n int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.n[table] += n
}

// An Observer that implements RetentionObserver hears what each pass deleted, per table, and
// OldestSent tells the age of the oldest SENT row kept, before and after the pass.
func TestRetentionObservedAndOldestSent(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	if _, ok, err := OldestSent(ctx, db); ok || err != nil {
		t.Fatalf("OldestSent of an empty table = %v, %v; want none", ok, err)
	}
	ids := enqueueN(t, db.DB, "ret_obs", 3)
	setRow(t, db, ids[0], sentSQL, -7200)
	setRow(t, db, ids[1], sentSQL, -7000)
	setRow(t, db, ids[2], sentSQL, -600)
	markSentByHand(t, db, enqueueOrdered(t, db.DB, "ret_obs", "k", 1)) // its counter is idle
	if age, ok, err := OldestSent(ctx, db); !ok || err != nil || age < 7200*time.Second || age > 7260*time.Second {
		t.Fatalf("OldestSent = %s, %v, %v; want about 2h", age, ok, err)
	}
	obs := &retainedObserver{n: map[string]int64{}}
	w := newTestWorker(t, db.DB, retentionRouter(t, "ret_obs"), Config{ReclaimInterval: time.Minute, Observer: obs, Retention: Retention{Sent: time.Hour}})
	s := signals(t, w)
	start(t, w)
	awaitRetained(t, s)
	obs.mu.Lock()
	got := fmt.Sprint(obs.n)
	obs.mu.Unlock()
	if want := "map[outbox_messages:2 outbox_ordering:1]"; got != want {
		t.Errorf("observed %s, want %s", got, want)
	}
	if age, ok, err := OldestSent(ctx, db); !ok || err != nil || age < 600*time.Second || age > 660*time.Second {
		t.Errorf("OldestSent after the pass = %s, %v, %v; want about 10m", age, ok, err)
	}
}
