package outbox

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/internal/testutil"
)

// On shutdown, rows the worker claimed ahead of its free slots (prefetched) are given back at
// once: no handler starts after Run's context ends, the rows are PENDING again, due now, with
// their attempts unchanged (an ordered head stays its key's head), Run returns as soon as the
// running handlers do, and another worker delivers each given-back row exactly once.
func TestShutdownGivesBackUnstartedRows(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	const slots = 2
	var (
		block       atomic.Bool  // handlers wait for release
		cancelled   atomic.Bool  // Run's context has been cancelled
		afterCancel atomic.Int64 // handlers started after the cancel
		release     = make(chan struct{})
		running     = make(chan MessageID, 64)
		mu          sync.Mutex
		starts      = map[MessageID]int{}
		order       []MessageID
	)
	r := NewRouter()
	r.Handle("gb", Policy{Timeout: 30 * time.Second}, func(_ context.Context, _ json.RawMessage, d Delivery) error {
		if cancelled.Load() {
			afterCancel.Add(1)
		}
		mu.Lock()
		starts[d.MessageID]++
		order = append(order, d.MessageID)
		mu.Unlock()
		if block.Load() {
			running <- d.MessageID
			<-release
		}
		return nil
	})
	cfg := Config{Concurrency: slots, BatchSize: 10, ShutdownTimeout: 60 * time.Second}
	w := newTestWorker(t, db.DB, r, cfg)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- w.Run(runCtx) }()

	// Teach the worker that handlers are fast, so that its next claim takes more rows than slots.
	warm := enqueueN(t, db.DB, "gb", 20)
	testutil.Eventually(t, 10*time.Second, "warm-up SENT", func() bool { return countRows(t, db, "status='SENT'") == len(warm) })
	block.Store(true)

	// The backlog, committed at once (a plain transaction: no hand-off), an ordered pair first.
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var backlog []MessageID
	for i := 0; i < 20; i++ {
		m := Message{EventType: "gb", Payload: json.RawMessage(`{"n":` + itoa(i) + `}`)}
		if i < 2 {
			m.OrderingKey = "gb-key"
		}
		id, err := Enqueue(ctx, tx, m)
		if err != nil {
			t.Fatal(err)
		}
		backlog = append(backlog, id)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	head, next := backlog[0], backlog[1]
	w.Wake()
	run := map[MessageID]bool{}
	for len(run) < slots {
		select {
		case id := <-running:
			run[id] = true
		case <-time.After(10 * time.Second):
			t.Fatalf("%d handlers running, want %d", len(run), slots)
		}
	}
	if n := countRows(t, db, "status='PROCESSING'"); n <= slots {
		t.Fatalf("%d rows PROCESSING with %d slots busy: nothing was prefetched, the test proves nothing", n, slots)
	}

	cancelled.Store(true)
	cancel()
	// At once: while the running handlers still hold their slots, every other backlog row is
	// PENDING again, due now, attempts not counted.
	testutil.Eventually(t, 3*time.Second, "unstarted rows given back", func() bool {
		now := dbNow(t, db)
		for _, id := range backlog {
			if run[id] {
				continue
			}
			row := getRow(t, db, id)
			if row.Status != "PENDING" || row.Attempts != 0 || row.NextAttemptAt.After(now) {
				return false
			}
		}
		return true
	})
	select {
	case err := <-errc:
		t.Fatalf("Run returned %v while %d handlers were still running", err, slots)
	default:
	}
	var queued, headSeq, minSeq int64
	if err := db.QueryRow(`SELECT COUNT(*), MIN(q.seq), (SELECT ordering_seq FROM outbox_messages WHERE id = ?)
		FROM outbox_ordering_queue q WHERE q.ordering_key = 'gb-key'`, int64(head)).Scan(&queued, &minSeq, &headSeq); err != nil {
		t.Fatal(err)
	}
	if queued != 2 || minSeq != headSeq {
		t.Fatalf("ordering queue of the key: %d entries, smallest seq %d; want 2, the head's %d", queued, minSeq, headSeq)
	}

	close(release)
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("Run returned %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within 10s of its running handlers (ShutdownTimeout 60s): it waited for rows it had not started")
	}
	if n := afterCancel.Load(); n != 0 {
		t.Fatalf("%d handlers started after Run's context was cancelled, want 0", n)
	}
	for id := range run {
		if s := statusOf(t, db, id); s != "SENT" {
			t.Fatalf("message %d, running at shutdown: %s, want SENT", id, s)
		}
	}

	block.Store(false)
	start(t, newTestWorker(t, db.DB, r, cfg))
	testutil.Eventually(t, 10*time.Second, "backlog SENT", func() bool {
		return countRows(t, db, "status='SENT'") == len(warm)+len(backlog)
	})
	mu.Lock()
	defer mu.Unlock()
	for _, id := range backlog {
		if starts[id] != 1 {
			t.Errorf("message %d handled %d times, want exactly 1", id, starts[id])
		}
		if row := getRow(t, db, id); row.Attempts != 1 {
			t.Errorf("message %d: attempts %d after one delivery, want 1 (a give-back is not an attempt)", id, row.Attempts)
		}
	}
	pos := map[MessageID]int{}
	for i, id := range order {
		pos[id] = i
	}
	if pos[head] > pos[next] {
		t.Errorf("ordered key delivered out of order: message %d before its head %d", next, head)
	}
}
