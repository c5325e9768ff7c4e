package outbox

import (
	"context"
	"database/sql"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/internal/testutil"
)

// The registry answers for one *sql.DB at a time: waking or handing off on one pool reaches
// none of the workers of another.
func TestRegistryKeepsDatabasesApart(t *testing.T) {
	t.Parallel()
	dbA, err := sql.Open("mysql", "u@tcp(127.0.0.1:1)/a")
	if err != nil {
		t.Fatal(err)
	}
	dbB, err := sql.Open("mysql", "u@tcp(127.0.0.1:1)/b")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dbA.Close(); dbB.Close() })
	wA := &Worker{wake: make(chan struct{}, 1)}
	wB := &Worker{wake: make(chan struct{}, 1)}
	r := newRegistry()
	r.add(dbA, wA)
	r.add(dbB, wB)

	r.wake(dbA)
	if len(wA.wake) != 1 || len(wB.wake) != 0 {
		t.Errorf("wake(A): A has %d wakes, B %d; want 1 and 0", len(wA.wake), len(wB.wake))
	}

	txA, txB := &sql.Tx{}, &sql.Tx{}
	h := r.beginHandoff(dbA, txA)
	if h == nil || h.db != dbA {
		t.Fatalf("beginHandoff(A) = %+v, want a collector on A", h)
	}
	if got := r.handoffFor(txA); got != h {
		t.Errorf("handoffFor(A's tx) = %p, want %p", got, h)
	}
	if got := r.handoffFor(txB); got != nil {
		t.Errorf("handoffFor(a tx of no InTx) = %p, want nil", got)
	}
	r.endHandoff(txA)
	if got := r.handoffFor(txA); got != nil {
		t.Errorf("handoffFor after endHandoff = %p, want nil", got)
	}

	r.remove(dbA, wA)
	if r.has(dbA) || !r.has(dbB) {
		t.Errorf("after remove(A): has(A) %v, has(B) %v; want false and true", r.has(dbA), r.has(dbB))
	}
	if h := r.beginHandoff(dbA, txA); h != nil {
		t.Errorf("beginHandoff on a pool with no worker = %+v, want nil", h)
	}
	if other := newRegistry(); other.has(dbB) {
		t.Error("a new registry sees the workers of another")
	}
}

// Two databases in one process, each with its own enqueue hook and worker: an enqueue on one runs
// only its hook, and InTx on it hands off to and wakes only its worker.
func TestTwoDatabasesInOneProcess(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	type world struct {
		db    *sql.DB
		got   deliveries
		w     *Worker
		ctx   context.Context
		hooks atomic.Int64
	}
	worlds := [2]*world{{db: migrated(t).DB}, {db: migrated(t).DB}}
	for i, wd := range worlds {
		name := string(rune('a' + i))
		wd.ctx = WithEnqueueHook(ctx, func(_ context.Context, _ string, h map[string]string) {
			wd.hooks.Add(1)
			h["world"] = name
		})
		r := NewRouter()
		r.Handle("welcome", Policy{}, wd.got.handler)
		wd.w = newTestWorker(t, wd.db, r, idleWorkerConfig(Config{Concurrency: 4}))
		start(t, wd.w)
	}
	a, b := worlds[0], worlds[1]
	claimsB := waitIdle(t, b.w)
	claimsA := waitIdle(t, a.w)

	// An unordered message is handed off; an ordered one is claimed after InTx's wake.
	err := InTx(a.ctx, a.db, func(tx *sql.Tx) error {
		if _, err := Enqueue(a.ctx, tx, Message{EventType: "welcome", Payload: []byte(`{}`)}); err != nil {
			return err
		}
		_, err := Enqueue(a.ctx, tx, Message{EventType: "welcome", Payload: []byte(`{}`), OrderingKey: "k"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "both messages SENT on A", func() bool {
		return countRows(t, a.db, "status = 'SENT'") == 2
	})
	if n := len(a.got.list()); n != 2 {
		t.Errorf("A's handler ran %d times, want 2", n)
	}
	for _, d := range a.got.list() {
		if d.Headers["world"] != "a" {
			t.Errorf("message %d delivered on A with headers %v, want A's hook's", d.MessageID, d.Headers)
		}
	}
	if ha, hb := a.hooks.Load(), b.hooks.Load(); ha != 2 || hb != 0 {
		t.Errorf("hooks ran %d times on A, %d on B; want 2 and 0", ha, hb)
	}
	if c := a.w.claims.Load(); c <= claimsA {
		t.Errorf("A's claims stayed at %d: InTx did not wake A's worker", c)
	}
	if n := len(b.got.list()); n != 0 {
		t.Errorf("B's handler ran %d times, want 0", n)
	}
	if c := b.w.claims.Load(); c != claimsB {
		t.Errorf("B's claims went from %d to %d: InTx on A woke B's worker", claimsB, c)
	}
}
