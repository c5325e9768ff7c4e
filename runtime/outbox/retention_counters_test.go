package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/internal/testutil"
)

// counterSeq is key's last_seq, or -1 when it has no counter.
func counterSeq(t testing.TB, db DBTX, key string) int64 {
	t.Helper()
	var seq int64
	err := db.QueryRowContext(context.Background(), "SELECT last_seq FROM outbox_ordering WHERE ordering_key = ?", key).Scan(&seq)
	if errors.Is(err, sql.ErrNoRows) {
		return -1
	}
	if err != nil {
		t.Fatalf("counter of %q: %v", key, err)
	}
	return seq
}

// markSentByHand does what the worker's SENT mark does to an ordered message: SENT, and its
// queue entry gone.
func markSentByHand(t testing.TB, db DBTX, id MessageID) {
	t.Helper()
	setRow(t, db, id, sentSQL, -10)
	if _, err := db.ExecContext(context.Background(), "DELETE FROM outbox_ordering_queue WHERE message_id = ?", int64(id)); err != nil {
		t.Fatal(err)
	}
}

// A worker's pass drops the counter of a key whose messages were all sent, and keeps those of
// keys with a message waiting (a PENDING one delayed, a FAILED head). The dropped key starts
// again at seq 1 and is delivered.
func TestRetentionDropsIdleCounters(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	var mu sync.Mutex
	var sent []orderedPayload
	r := NewRouter()
	r.Handle("ret_o", Policy{}, func(_ context.Context, raw json.RawMessage, _ Delivery) error {
		var p orderedPayload
		if err := json.Unmarshal(raw, &p); err != nil {
			return err
		}
		if p.Key == "failed" {
			return Permanent(errors.New("no"))
		}
		mu.Lock()
		sent = append(sent, p)
		mu.Unlock()
		return nil
	})
	enqueueOrdered(t, db.DB, "ret_o", "done😀", 1)
	enqueueOrdered(t, db.DB, "ret_o", "done😀", 2)
	enqueueOrdered(t, db.DB, "ret_o", "delayed", 1, Delay(24*time.Hour))
	enqueueOrdered(t, db.DB, "ret_o", "failed", 1)
	w := newTestWorker(t, db.DB, r, Config{ReclaimInterval: 50 * time.Millisecond})
	s := signals(t, w)
	start(t, w)
	testutil.Eventually(t, 10*time.Second, "the done key's counter dropped", func() bool {
		awaitRetained(t, s)
		return counterSeq(t, db, "done😀") == -1
	})
	if countRows(t, db, "status='SENT'") != 2 || countRows(t, db, "status='FAILED'") != 1 {
		t.Fatalf("SENT %d, FAILED %d; want 2 and 1", countRows(t, db, "status='SENT'"), countRows(t, db, "status='FAILED'"))
	}
	if counterSeq(t, db, "delayed") != 1 || counterSeq(t, db, "failed") != 1 {
		t.Errorf("counters of waiting keys: delayed %d, failed %d; want both kept at 1", counterSeq(t, db, "delayed"), counterSeq(t, db, "failed"))
	}
	id := enqueueOrdered(t, db.DB, "ret_o", "done😀", 3)
	if seq := getOrderingSeq(t, db, id); seq != 1 {
		t.Errorf("the dropped key's next message took seq %d, want 1", seq)
	}
	testutil.Eventually(t, 10*time.Second, "the new message sent", func() bool { return statusOf(t, db, id) == "SENT" })
	mu.Lock()
	defer mu.Unlock()
	if len(sent) != 3 || sent[0].N != 1 || sent[1].N != 2 || sent[2].N != 3 {
		t.Errorf("delivered %+v, want the done key's 1, 2, 3 in order", sent)
	}
}

func getOrderingSeq(t testing.TB, db DBTX, id MessageID) int64 {
	t.Helper()
	var seq sql.NullInt64
	if err := db.QueryRowContext(context.Background(), "SELECT ordering_seq FROM outbox_messages WHERE id = ?", int64(id)).Scan(&seq); err != nil {
		t.Fatal(err)
	}
	return seq.Int64
}

// pinnedTx begins a transaction on a connection of its own and returns it with the session's id.
func pinnedTx(t testing.TB, db *sql.DB) (*sql.Tx, int64) {
	t.Helper()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	var id int64
	if err := conn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
		t.Fatal(err)
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback() })
	return tx, id
}

// awaitLockWait waits until session id waits for a row lock; done says the session's work
// ended instead.
func awaitLockWait(t testing.TB, db DBTX, id int64, done <-chan error) {
	t.Helper()
	ctx := context.Background()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		select {
		case err := <-done:
			t.Fatalf("the enqueue ended without waiting for the counter row: %v", err)
		default:
		}
		// MariaDB 10.11 sometimes leaves a waiting transaction out of INNODB_TRX, so the counter
		// statement running for a second counts as waiting too: nothing else in it takes that long.
		var n int
		err := db.QueryRowContext(ctx,
			`SELECT (SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_mysql_thread_id = ? AND trx_state = 'LOCK WAIT')
			      + (SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE id = ? AND info LIKE '%INSERT INTO outbox_ordering %' AND time >= 1)`,
			id, id).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
	}
	var state, info sql.NullString
	_ = db.QueryRowContext(ctx, "SELECT state, info FROM information_schema.PROCESSLIST WHERE id = ?", id).Scan(&state, &info)
	var trx sql.NullString
	_ = db.QueryRowContext(ctx, "SELECT CONCAT(trx_state, ' ', COALESCE(trx_query, '')) FROM information_schema.INNODB_TRX WHERE trx_mysql_thread_id = ?", id).Scan(&trx)
	t.Fatalf("the enqueue did not wait for the counter row within 10s: session state %q, statement %q, trx %q", state.String, info.String, trx.String)
}

// The race of a counter's deletion with an enqueue of its key, both orders, driven step by step.
// Cleaner first: the enqueue waits at the counter row until the deletion commits, then starts
// the key again at seq 1, and the key's messages are delivered in order. Enqueue first: the
// cleaner skips the counter its open transaction holds, without waiting for it, and once the
// enqueue committed, keeps it because the key has a message queued.
func TestRetentionCounterRaceWithEnqueue(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	conn, err := db.DB.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	// Cleaner first.
	markSentByHand(t, db, enqueueOrdered(t, db.DB, "ret_race", "a", 1))
	var enqueued MessageID
	done := make(chan error, 1)
	n, err := dropCounters(ctx, conn, []string{"a"}, func() {
		tx, session := pinnedTx(t, db.DB)
		go func() {
			var err error
			enqueued, err = Enqueue(ctx, tx, Message{EventType: "ret_race", Payload: []byte(`{"key":"a","n":2}`), OrderingKey: "a", MaxAttempts: 1})
			if err == nil {
				err = tx.Commit()
			}
			done <- err
		}()
		awaitLockWait(t, db, session, done)
	})
	if err != nil || n != 1 {
		t.Fatalf("dropCounters = %d, %v; want the counter deleted", n, err)
	}
	if err := <-done; err != nil {
		t.Fatalf("enqueue after the deletion: %v", err)
	}
	if seq := getOrderingSeq(t, db, enqueued); seq != 1 || counterSeq(t, db, "a") != 1 {
		t.Errorf("enqueue after the deletion took seq %d (counter %d), want 1", seq, counterSeq(t, db, "a"))
	}
	next := enqueueOrdered(t, db.DB, "ret_race", "a", 3)
	if seq := getOrderingSeq(t, db, next); seq != 2 {
		t.Errorf("the following enqueue took seq %d, want 2", seq)
	}
	var mu sync.Mutex
	var order []MessageID
	r := NewRouter()
	r.Handle("ret_race", Policy{}, func(_ context.Context, _ json.RawMessage, d Delivery) error {
		mu.Lock()
		order = append(order, d.MessageID)
		mu.Unlock()
		return nil
	})
	stop := start(t, newTestWorker(t, db.DB, r, Config{Retention: Retention{Sent: KeepForever}}))
	testutil.Eventually(t, 10*time.Second, "both sent", func() bool { return countRows(t, db, "status='SENT'") == 3 })
	stop()
	mu.Lock()
	if len(order) != 2 || order[0] != enqueued || order[1] != next {
		t.Errorf("delivered %v, want %d then %d", order, enqueued, next)
	}
	mu.Unlock()

	// Enqueue first.
	markSentByHand(t, db, enqueueOrdered(t, db.DB, "ret_race", "b", 1))
	tx, _ := pinnedTx(t, db.DB)
	id, err := Enqueue(ctx, tx, Message{EventType: "ret_race", Payload: []byte(`{}`), OrderingKey: "b"})
	if err != nil {
		t.Fatal(err)
	}
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	n, err = dropCounters(dctx, conn, []string{"b"}, nil)
	cancel()
	if err != nil || n != 0 {
		t.Fatalf("dropCounters while an enqueue holds the counter = %d, %v; want 0 at once", n, err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if n, err := dropCounters(ctx, conn, []string{"b"}, nil); err != nil || n != 0 {
		t.Fatalf("dropCounters with a message queued = %d, %v; want 0", n, err)
	}
	if seq := getOrderingSeq(t, db, id); seq != 2 || counterSeq(t, db, "b") != 2 {
		t.Errorf("seq %d, counter %d; want 2 and 2", seq, counterSeq(t, db, "b"))
	}
}

// A pass deletes the run ledger rows older than their job's latest period and than a week, and
// keeps every job's latest row however old it is.
func TestRetentionJobRuns(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ins := func(job string, daysAgo int) {
		db.MustExec(t, `INSERT INTO outbox_job_runs (job, period_start, instance, started_at, finished_at)
			VALUES (?, TIMESTAMPADD(DAY, ?, UTC_TIMESTAMP(6)), 'i', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))`, job, -daysAgo)
	}
	for _, d := range []int{30, 10, 8, 6, 1} {
		ins("daily", d)
	}
	ins("stopped", 40) // its only row, and its latest: kept
	ins("stopped2", 50)
	ins("stopped2", 45)
	w := newTestWorker(t, db.DB, retentionRouter(t, "ret_j"), Config{ReclaimInterval: time.Minute})
	s := signals(t, w)
	start(t, w)
	if p := awaitRetained(t, s); p.JobRuns != 4 {
		t.Errorf("pass = %+v, want 4 ledger rows deleted", p)
	}
	rows, err := db.DB.Query("SELECT job, DATEDIFF(UTC_TIMESTAMP(6), period_start) FROM outbox_job_runs ORDER BY job, period_start")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var job string
		var days int
		if err := rows.Scan(&job, &days); err != nil {
			t.Fatal(err)
		}
		got = append(got, job+":"+itoa(days))
	}
	want := "daily:6 daily:1 stopped:40 stopped2:45"
	if g := strings.Join(got, " "); g != want {
		t.Errorf("ledger left %q, want %q", g, want)
	}
}
