package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/internal/testutil"
)

// statusIn reads a row's status and claim token on tx (the uncommitted view of InTx's fn).
func statusIn(t *testing.T, tx *sql.Tx, id MessageID) (status string, token sql.NullString) {
	t.Helper()
	if err := tx.QueryRow("SELECT status, claim_token FROM outbox_messages WHERE id = ?", id).Scan(&status, &token); err != nil {
		t.Fatal(err)
	}
	return status, token
}

// deliveries records handler calls with their Delivery.
type deliveries struct {
	mu  sync.Mutex
	all []Delivery
}

func (d *deliveries) handler(ctx context.Context, _ json.RawMessage, dl Delivery) error {
	d.mu.Lock()
	d.all = append(d.all, dl)
	d.mu.Unlock()
	return nil
}

func (d *deliveries) list() []Delivery {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]Delivery(nil), d.all...)
}

func (w *Worker) freeSlots() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.free
}

// An idle worker that polls once an hour: whatever it delivers came through the handoff.
func idleWorkerConfig(c Config) Config {
	c.PollInterval, c.MinPollInterval = time.Hour, time.Hour
	return c
}

// waitIdle waits for the worker's first claim (Run claims once at start) to be done.
func waitIdle(t *testing.T, w *Worker) int64 {
	t.Helper()
	// The first claim has ended and reserves no slot: a handoff now finds the worker idle.
	testutil.Eventually(t, 10*time.Second, "the first claim to end", func() bool {
		return w.claims.Load() >= 1 && w.quiet()
	})
	return w.claims.Load()
}

// waitQuiet waits until no claim runs and no handler holds a slot: every delivery that has
// begun has been recorded, and a later one needs a row that is not SENT yet.
func waitQuiet(t *testing.T, w *Worker) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, "no claim running and every slot free", w.quiet)
}

// quiet says no claim runs and every dispatch slot is free.
func (w *Worker) quiet() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.claiming == 0 && w.free == w.cfg.Concurrency
}

// A message enqueued in InTx is written claimed by the worker of this process and handled after
// the commit with no claim transaction: the worker polls once an hour and never claims again.
func TestInTxHandsOffToTheWorkerOfThisProcess(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	var got deliveries
	r := NewRouter()
	r.Handle("welcome", Policy{}, got.handler)
	obs := &handoffCount{}
	w := newTestWorker(t, db.DB, r, idleWorkerConfig(Config{Concurrency: 4, Observer: obs}))
	start(t, w)
	claims := waitIdle(t, w)

	const n = 20
	ids := make([]MessageID, 0, n)
	for i := 0; i < n; i++ {
		err := InTx(ctx, db.DB, func(tx *sql.Tx) error {
			id, err := Enqueue(ctx, tx, Message{EventType: "welcome", Payload: []byte(`{"i":` + itoa(i) + `}`), IdempotencyKey: "user:" + itoa(i)})
			if err != nil {
				return err
			}
			// Before the commit the row is already this worker's claim, invisible to others.
			if st, tok := statusIn(t, tx, id); st != "PROCESSING" || !tok.Valid || tok.String == "" {
				t.Errorf("inside the transaction: status %s, token %v; want PROCESSING with a token", st, tok)
			}
			ids = append(ids, id)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		// The handler runs in a goroutine of its own: on a loaded machine the next InTx could
		// find all four slots still taken, and that message would wait for a claim.
		waitQuiet(t, w)
	}
	testutil.Eventually(t, 10*time.Second, "every message SENT", func() bool {
		return countRows(t, db, "status = 'SENT'") == n
	})
	if c := w.claims.Load(); c != claims {
		t.Errorf("claim transactions went from %d to %d; a handoff needs none", claims, c)
	}
	seen := map[MessageID]int{}
	for _, d := range got.list() {
		seen[d.MessageID]++
		row := getRow(t, db, d.MessageID)
		if d.Attempt != 1 || row.Attempts != 1 || d.ClaimToken != row.ClaimToken.String || d.MaxAttempts != DefaultMaxAttempts {
			t.Errorf("message %d: delivery attempt %d token %q max %d, row attempts %d token %q; want attempt 1 of %d under the row's token",
				d.MessageID, d.Attempt, d.ClaimToken, d.MaxAttempts, row.Attempts, row.ClaimToken.String, DefaultMaxAttempts)
		}
		if d.IdempotencyKey != row.Key || d.EnqueuedAt.IsZero() {
			t.Errorf("message %d: key %q enqueued %v; want the row's key %q and a time", d.MessageID, d.IdempotencyKey, d.EnqueuedAt, row.Key)
		}
	}
	for _, id := range ids {
		if seen[id] != 1 {
			t.Errorf("message %d handled %d times, want once", id, seen[id])
		}
	}
	if f := w.freeSlots(); f != 4 {
		t.Errorf("free slots after the handoffs: %d, want all 4", f)
	}
	// An Observer that implements HandoffObserver hears of each: Claimed never does.
	if h, c := obs.handedOff.Load(), obs.claimedRows.Load(); h != n || c != 0 {
		t.Errorf("observer: %d handed off, %d claimed rows; want %d and 0", h, c, n)
	}
}

// handoffCount is an Observer that also implements HandoffObserver.
type handoffCount struct {
	NopObserver
	handedOff, claimedRows atomic.Int64
}

func (o *handoffCount) Claimed(n int, _ time.Duration) { o.claimedRows.Add(int64(n)) }
func (o *handoffCount) HandedOff(n int)                { o.handedOff.Add(int64(n)) }

// What cannot be handed off is written PENDING and claimed as before: an ordered message (its
// key's turn decides), a delayed one, a type this process's worker does not handle.
func TestInTxHandsOffOnlyWhatTheWorkerCanRunNow(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	var got deliveries
	r := NewRouter()
	r.Handle("welcome", Policy{}, got.handler)
	w := newTestWorker(t, db.DB, r, Config{PollInterval: 50 * time.Millisecond})
	start(t, w)
	waitIdle(t, w)

	var ordered, delayed, other, plain MessageID
	err := InTx(ctx, db.DB, func(tx *sql.Tx) error {
		var err error
		if ordered, err = Enqueue(ctx, tx, Message{EventType: "welcome", Payload: []byte(`{}`), OrderingKey: "user:1"}); err != nil {
			return err
		}
		if delayed, err = Enqueue(ctx, tx, Message{EventType: "welcome", Payload: []byte(`{}`)}, Delay(200*time.Millisecond)); err != nil {
			return err
		}
		if other, err = Enqueue(ctx, tx, Message{EventType: "invoice", Payload: []byte(`{}`)}); err != nil {
			return err
		}
		if plain, err = Enqueue(ctx, tx, Message{EventType: "welcome", Payload: []byte(`{}`)}); err != nil {
			return err
		}
		for _, id := range []MessageID{ordered, delayed, other} {
			if st, tok := statusIn(t, tx, id); st != "PENDING" || tok.Valid {
				t.Errorf("message %d inside the transaction: %s, token %v; want PENDING without a token", id, st, tok)
			}
		}
		if st, _ := statusIn(t, tx, plain); st != "PROCESSING" {
			t.Errorf("plain message inside the transaction: %s; want PROCESSING (handed off)", st)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "the three welcome messages SENT", func() bool {
		return statusOf(t, db, ordered) == "SENT" && statusOf(t, db, delayed) == "SENT" && statusOf(t, db, plain) == "SENT"
	})
	if st := statusOf(t, db, other); st != "PENDING" {
		t.Errorf("a type no worker here handles: %s, want PENDING", st)
	}
	if n := len(got.list()); n != 3 {
		t.Errorf("%d handler calls, want 3", n)
	}
}

// A rolled-back transaction hands nothing over and gives its slots back; a worker with no slot
// free gets no handoff (the message is claimed once a slot frees).
func TestInTxHandoffRollbackAndBusyWorker(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	release := make(chan struct{})
	var got deliveries
	r := NewRouter()
	r.Handle("welcome", Policy{}, func(ctx context.Context, p json.RawMessage, d Delivery) error {
		<-release
		return got.handler(ctx, p, d)
	})
	w := newTestWorker(t, db.DB, r, Config{Concurrency: 1, PollInterval: 50 * time.Millisecond})
	start(t, w)
	waitIdle(t, w)

	boom := errors.New("boom")
	for i := 0; i < 3; i++ {
		err := InTx(ctx, db.DB, func(tx *sql.Tx) error {
			if _, err := Enqueue(ctx, tx, Message{EventType: "welcome", Payload: []byte(`{}`)}); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("InTx = %v, want boom", err)
		}
	}
	// The slot comes back; a poll's claim may hold it for a moment, so this waits for both.
	waitQuiet(t, w)
	if n := countRows(t, db, "1=1"); n != 0 {
		t.Fatalf("%d rows after rollbacks, want 0", n)
	}

	var first, second MessageID
	for i, id := range []*MessageID{&first, &second} {
		err := InTx(ctx, db.DB, func(tx *sql.Tx) error {
			var err error
			if *id, err = Enqueue(ctx, tx, Message{EventType: "welcome", Payload: []byte(`{}`)}); err != nil {
				return err
			}
			want := []string{"PROCESSING", "PENDING"}[i] // the one slot is taken by the first
			if st, _ := statusIn(t, tx, *id); st != want {
				t.Errorf("message %d inside its transaction: %s, want %s", i+1, st, want)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	close(release)
	testutil.Eventually(t, 10*time.Second, "both SENT", func() bool {
		return statusOf(t, db, first) == "SENT" && statusOf(t, db, second) == "SENT"
	})
	if n := len(got.list()); n != 2 {
		t.Errorf("%d handler calls, want 2", n)
	}
}

// When the worker stops before the transaction commits, InTx gives the row back: PENDING, due at
// once, its attempt returned, and the next worker delivers it.
func TestInTxHandoffWorkerStoppedBeforeCommit(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	var got deliveries
	r := NewRouter()
	r.Handle("welcome", Policy{}, got.handler)
	w := newTestWorker(t, db.DB, r, idleWorkerConfig(Config{}))
	stop := start(t, w)
	waitIdle(t, w)

	var id MessageID
	err := InTx(ctx, db.DB, func(tx *sql.Tx) error {
		var err error
		if id, err = Enqueue(ctx, tx, Message{EventType: "welcome", Payload: []byte(`{}`)}); err != nil {
			return err
		}
		if st, _ := statusIn(t, tx, id); st != "PROCESSING" {
			t.Errorf("inside the transaction: %s, want PROCESSING (handed off)", st)
		}
		stop()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if row := getRow(t, db, id); row.Status != "PENDING" || row.Attempts != 0 {
		t.Fatalf("after the commit: %s, attempts %d; want PENDING with the attempt given back", row.Status, row.Attempts)
	}
	if n := len(got.list()); n != 0 {
		t.Fatalf("%d handler calls by a stopped worker", n)
	}
	w2 := newTestWorker(t, db.DB, r, Config{})
	start(t, w2)
	testutil.Eventually(t, 10*time.Second, "SENT by the next worker", func() bool { return statusOf(t, db, id) == "SENT" })
	if l := got.list(); len(l) != 1 || l[0].Attempt != 1 {
		t.Errorf("deliveries %+v, want one, attempt 1", l)
	}
}

// fn committing itself: InTx cannot tell whether the rows are committed, so it gives them back
// (a no-op for rows rolled back) and wakes the workers, which claim and deliver them once.
func TestInTxHandoffWhenFnCommitsItself(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	var got deliveries
	r := NewRouter()
	r.Handle("welcome", Policy{}, got.handler)
	w := newTestWorker(t, db.DB, r, Config{PollInterval: time.Hour, MinPollInterval: 20 * time.Millisecond})
	start(t, w)
	waitIdle(t, w)

	var id MessageID
	err := InTx(ctx, db.DB, func(tx *sql.Tx) error {
		var err error
		if id, err = Enqueue(ctx, tx, Message{EventType: "welcome", Payload: []byte(`{}`)}); err != nil {
			return err
		}
		return tx.Commit()
	})
	if !errors.Is(err, ErrTxEnded) {
		t.Fatalf("InTx = %v, want ErrTxEnded", err)
	}
	testutil.Eventually(t, 10*time.Second, "SENT", func() bool { return statusOf(t, db, id) == "SENT" })
	// The wake after ErrTxEnded starts a claim, which reserves slots while it runs (free is
	// negative then): what must hold is that every slot comes back once it is done.
	waitQuiet(t, w)
	if l := got.list(); len(l) != 1 || l[0].Attempt != 1 {
		t.Errorf("deliveries %+v, want exactly one, attempt 1", l)
	}
}

// A transaction that stays open so long that the handler could outlive the lease that began at
// the INSERT: the handler does not run on the stale handoff; the row is given back and claimed
// with a fresh lease, and delivered once. The worker's clock moves ahead inside the
// transaction, so the transaction lasts long for the worker without the test waiting.
func TestInTxHandoffSlowTransactionGivesBack(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	var got deliveries
	r := NewRouter()
	r.Handle("welcome", Policy{Timeout: 200 * time.Millisecond}, got.handler)
	w := newTestWorker(t, db.DB, r, Config{StaleAfter: time.Second, PollInterval: 50 * time.Millisecond})
	clock := clockAhead(w)
	start(t, w)
	waitIdle(t, w)

	var id MessageID
	var token string
	err := InTx(ctx, db.DB, func(tx *sql.Tx) error {
		var err error
		if id, err = Enqueue(ctx, tx, Message{EventType: "welcome", Payload: []byte(`{}`)}); err != nil {
			return err
		}
		_, tok := statusIn(t, tx, id)
		token = tok.String
		clock.advance(900 * time.Millisecond) // + the 200ms timeout > the 1s lease
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "SENT", func() bool { return statusOf(t, db, id) == "SENT" })
	waitQuiet(t, w)
	l := got.list()
	if len(l) != 1 || l[0].Attempt != 1 || l[0].ClaimToken == token {
		t.Errorf("deliveries %+v, want exactly one, attempt 1, under a claim other than the handoff's %s", l, token)
	}
}

// A claim in progress holds every free slot for its duration; a handoff borrows them rather than
// fall back to a wake and another claim (which made W3's same-process p99 tail).
func TestInTxHandoffDuringAClaim(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	var got deliveries
	r := NewRouter()
	r.Handle("welcome", Policy{}, got.handler)
	w := newTestWorker(t, db.DB, r, idleWorkerConfig(Config{Concurrency: 2}))
	inClaim, unblock := make(chan struct{}), make(chan struct{})
	var once sync.Once
	w.afterClaimSelect = func() {
		once.Do(func() {
			close(inClaim)
			<-unblock
		})
	}
	start(t, w)
	<-inClaim
	var id MessageID
	err := InTx(ctx, db.DB, func(tx *sql.Tx) error {
		var err error
		if id, err = Enqueue(ctx, tx, Message{EventType: "welcome", Payload: []byte(`{}`)}); err != nil {
			return err
		}
		if st, _ := statusIn(t, tx, id); st != "PROCESSING" {
			t.Errorf("enqueued while a claim held the slots: %s, want PROCESSING (handed off)", st)
		}
		return nil
	})
	close(unblock)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "SENT", func() bool { return statusOf(t, db, id) == "SENT" })
	if c := w.claims.Load(); c != 1 {
		t.Errorf("%d claims, want only the first", c)
	}
	testutil.Eventually(t, 5*time.Second, "all slots free", func() bool { return w.freeSlots() == 2 })
}

// A handed-off row whose worker never ran it and could not give it back (the process died, here
// a stopped worker and a failed give-back write) is an ordinary expired claim: any worker's
// reclaim makes it PENDING after the lease and it is delivered, once.
func TestInTxHandoffNeverRunIsReclaimed(t *testing.T) {
	t.Parallel()
	d, inj, db := faultyDB(t)
	ctx := context.Background()
	inj.Fail("MessageGiveBack", errors.New("injected: connection lost"))
	var got deliveries
	r := NewRouter()
	r.Handle("welcome", Policy{Timeout: 200 * time.Millisecond}, got.handler)
	a := newTestWorker(t, db, r, idleWorkerConfig(Config{StaleAfter: time.Second}))
	stopA := start(t, a)
	waitIdle(t, a)

	var id MessageID
	err := InTx(ctx, db, func(tx *sql.Tx) error {
		var err error
		if id, err = Enqueue(ctx, tx, Message{EventType: "welcome", Payload: []byte(`{}`)}); err != nil {
			return err
		}
		stopA()
		return nil
	})
	if err != nil {
		t.Fatalf("InTx = %v; the commit succeeded, so it must not fail", err)
	}
	if row := getRow(t, d, id); row.Status != "PROCESSING" || row.Attempts != 1 {
		t.Fatalf("after a failed give-back: %s, attempts %d; want the handoff's claim (PROCESSING, 1)", row.Status, row.Attempts)
	}
	b := newTestWorker(t, d.DB, r, Config{StaleAfter: time.Second, ReclaimInterval: 100 * time.Millisecond, PollInterval: 50 * time.Millisecond})
	start(t, b)
	testutil.Eventually(t, 15*time.Second, "SENT after the reclaim", func() bool { return statusOf(t, d, id) == "SENT" })
	if l := got.list(); len(l) != 1 || l[0].Attempt != 2 {
		t.Errorf("deliveries %+v, want exactly one, attempt 2 (the handoff's claim counted)", l)
	}
}
