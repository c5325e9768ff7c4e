package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/internal/testutil"
)

func TestUnhandledTypeStaysPending(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	r := NewRouter()
	r.Handle("handled_here", Policy{}, func(context.Context, json.RawMessage, Delivery) error { return nil })
	w := newTestWorker(t, db.DB, r, Config{})
	sig := signals(t, w)
	start(t, w)
	other := enqueueN(t, db.DB, "new_type_from_newer_release", 3)
	mine := enqueueN(t, db.DB, "handled_here", 3)
	testutil.Eventually(t, 5*time.Second, "handled rows SENT", func() bool { return countRows(t, db, "event_type='handled_here' AND status='SENT'") == 3 })
	sig.awaitClaims(3) // several more polls
	for _, id := range other {
		if r := getRow(t, db, id); r.Status != "PENDING" || r.Attempts != 0 || r.ClaimToken.Valid {
			t.Errorf("unhandled row %+v, want PENDING, attempts 0, never claimed", r)
		}
	}
	_ = mine
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
	clock := clockAhead(w)
	start(t, w)
	testutil.Eventually(t, 20*time.Second, "2,000 handled", func() bool { return c.total() >= 2000 })
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	// rescanEvery passes for the worker at once, however fast the handlers drain the backlog.
	clock.advance(rescanEvery)
	testutil.Eventually(t, 60*time.Second, "all SENT", func() bool { return countRows(t, db, "status='SENT'") == before+after+1 })
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
	testutil.Eventually(t, 5*time.Second, "the 900 rows not held handled", func() bool { return c.total() >= 900 })
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

// The claim's marking UPDATE locks only the rows this claim holds: another transaction holding
// other PENDING rows (a claim left open, an operator's SELECT ... FOR UPDATE) must not make it
// wait. With a 1 s lock wait, a mark that scanned the claim index by status fails with 1205.
func TestClaimMarkLocksOnlyItsRows(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	r := NewRouter()
	r.Handle("mark", Policy{}, func(context.Context, json.RawMessage, Delivery) error { return nil })
	ids := enqueueN(t, db.DB, "mark", 400)
	held, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Rollback()
	// Hold every other row, so that the rows the claim takes sit between held ones in every index.
	for i := 0; i < len(ids); i += 2 {
		if _, err := held.Exec("SELECT id FROM outbox_messages WHERE id = ? FOR UPDATE", int64(ids[i])); err != nil {
			t.Fatal(err)
		}
	}
	pool, err := sql.Open("mysql", db.DSN+"&innodb_lock_wait_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	w := newTestWorker(t, pool, r, Config{})
	for range 3 {
		got, _, err := w.claim(ctx, 50, claimPos{})
		if err != nil {
			t.Fatalf("claim beside a transaction holding other rows: %v", err)
		}
		if len(got) != 50 {
			t.Fatalf("claimed %d rows, want 50", len(got))
		}
		for _, m := range got {
			if (int64(m.id)-int64(ids[0]))%2 == 0 {
				t.Fatalf("claimed row %d, which the other transaction holds", m.id)
			}
		}
	}
}
