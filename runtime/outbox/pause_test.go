package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// handled records each delivery's message id on a channel, for tests that wait for one.
type handled chan MessageID

func (h handled) handler(_ context.Context, _ json.RawMessage, d Delivery) error {
	h <- d.MessageID
	return nil
}

// wait waits for every one of ids to be handled, in any order, failing after 20s.
func (h handled) wait(t *testing.T, ids ...MessageID) {
	t.Helper()
	want := map[MessageID]bool{}
	for _, id := range ids {
		want[id] = true
	}
	deadline := time.After(20 * time.Second)
	for len(want) > 0 {
		select {
		case got := <-h:
			delete(want, got)
		case <-deadline:
			t.Fatalf("messages %v were not handled within 20s", want)
		}
	}
}

// enqueueCommitted commits one message of each type in one plain transaction, which no
// hand-off sees, so only a claim can deliver them.
func enqueueCommitted(t *testing.T, db *sql.DB, types ...string) []MessageID {
	t.Helper()
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	var ids []MessageID
	for _, typ := range types {
		id, err := Enqueue(ctx, tx, Message{EventType: typ, Payload: json.RawMessage(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return ids
}

// waitPaused waits for a refresh of w's pauses that finds n of its types paused, and returns
// how long that took.
func waitPaused(t *testing.T, w *Worker, n int) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		if w.testSignals.pausesRefreshed.WaitFor(10*time.Second) == n {
			return time.Since(start)
		}
	}
}

// A paused type is not claimed by a running worker within a second of Pause, while another
// type of the same worker goes on being delivered. Both messages commit together, so the
// claim that delivered the other would have taken the paused one too.
func TestPauseStopsClaimsWithinASecond(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	got := make(handled, 16)
	r := NewRouter()
	r.Handle("mail", Policy{}, got.handler)
	r.Handle("sms", Policy{}, got.handler)
	w := newTestWorker(t, db.DB, r, Config{})
	w.testSignals.init(t)
	start(t, w)
	waitPaused(t, w, 0)

	if err := Pause(ctx, db, "mail", PauseOptions{Reason: "provider down"}); err != nil {
		t.Fatal(err)
	}
	if took := waitPaused(t, w, 1); took > time.Second {
		t.Errorf("the worker saw the pause after %s, want within a second", took)
	}
	ids := enqueueCommitted(t, db.DB, "mail", "sms")
	got.wait(t, ids[1])
	if st := statusOf(t, db, ids[0]); st != "PENDING" {
		t.Fatalf("paused type's message is %s after the other type's delivery, want PENDING", st)
	}
	if p := w.PausedTypes(); len(p) != 1 || p[0] != "mail" {
		t.Errorf("PausedTypes = %v, want [mail]", p)
	}
	ps, err := Pauses(ctx, db)
	if err != nil || len(ps) != 1 || ps[0].EventType != "mail" || ps[0].Reason != "provider down" || !ps[0].Until.IsZero() {
		t.Fatalf("Pauses = %+v, %v; want mail, its reason and no end", ps, err)
	}

	if err := Resume(ctx, db, "mail"); err != nil {
		t.Fatal(err)
	}
	got.wait(t, ids[0])
	if err := Resume(ctx, db, "mail"); err != nil {
		t.Errorf("Resume of a type not paused: %v, want nil", err)
	}
}

// A pause with For ends by itself: the worker claims the type again with no Resume.
func TestPauseForEndsByItself(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	got := make(handled, 16)
	r := NewRouter()
	r.Handle("mail", Policy{}, got.handler)
	r.Handle("sms", Policy{}, got.handler)
	w := newTestWorker(t, db.DB, r, Config{})
	w.testSignals.init(t)
	start(t, w)
	waitPaused(t, w, 0)

	if err := Pause(ctx, db, "mail", PauseOptions{For: 3 * time.Second}); err != nil {
		t.Fatal(err)
	}
	waitPaused(t, w, 1)
	ids := enqueueCommitted(t, db.DB, "mail", "sms")
	got.wait(t, ids[1])
	if st := statusOf(t, db, ids[0]); st != "PENDING" {
		t.Fatalf("paused type's message is %s while paused, want PENDING", st)
	}
	ps, err := Pauses(ctx, db)
	if err != nil || len(ps) != 1 || ps[0].Until.IsZero() || ps[0].Left <= 0 || ps[0].Left > 3*time.Second {
		t.Fatalf("Pauses = %+v, %v; want mail with an end within 3s", ps, err)
	}
	waitPaused(t, w, 0) // the end passed on the database clock
	got.wait(t, ids[0])
	if ps, err := Pauses(ctx, db); err != nil || len(ps) != 0 {
		t.Errorf("Pauses after the end = %+v, %v; want none", ps, err)
	}
}

// InTx's hand-off leaves a paused type's message PENDING for a claim, and hands off again once
// the type is resumed.
func TestHandOffHonoursPause(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	got := make(handled, 16)
	r := NewRouter()
	r.Handle("welcome", Policy{}, got.handler)
	w := newTestWorker(t, db.DB, r, idleWorkerConfig(Config{Concurrency: 4}))
	w.testSignals.init(t)
	start(t, w)
	waitIdle(t, w)

	enqueueInTx := func() (id MessageID, status string) {
		t.Helper()
		err := InTx(ctx, db.DB, func(tx *sql.Tx) error {
			var err error
			id, err = Enqueue(ctx, tx, Message{EventType: "welcome", Payload: json.RawMessage(`{}`)})
			if err == nil {
				status, _ = statusIn(t, tx, id)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return id, status
	}
	// The worker's view of the pauses is read again at the next claim or hand-off.
	stale := func() {
		w.pauses.mu.Lock()
		w.pauses.at = time.Time{}
		w.pauses.mu.Unlock()
	}

	if err := Pause(ctx, db, "welcome", PauseOptions{}); err != nil {
		t.Fatal(err)
	}
	stale()
	id, status := enqueueInTx()
	if status != "PENDING" {
		t.Fatalf("a paused type's message was written %s in InTx, want PENDING (not handed off)", status)
	}
	// InTx woke the worker. Its claim leaves the paused type alone.
	w.testSignals.claimed.Clear()
	w.Wake()
	if n := w.testSignals.claimed.WaitFor(10 * time.Second); n != 0 {
		t.Fatalf("a claim while paused took %d rows, want 0", n)
	}
	if st := statusOf(t, db, id); st != "PENDING" {
		t.Fatalf("paused message is %s, want PENDING", st)
	}

	if err := Resume(ctx, db, "welcome"); err != nil {
		t.Fatal(err)
	}
	stale()
	w.Wake()
	got.wait(t, id)
	stale()
	if _, status := enqueueInTx(); status != "PROCESSING" {
		t.Errorf("after Resume a message was written %s in InTx, want PROCESSING (handed off)", status)
	}
}

func TestPauseArgumentErrors(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	for _, tc := range []struct {
		typ  string
		o    PauseOptions
		want string
	}{
		{"", PauseOptions{}, "1 to 191 bytes"},
		{strings.Repeat("x", 192), PauseOptions{}, "1 to 191 bytes"},
		{"a\xff", PauseOptions{}, "valid UTF-8"},
		{"a", PauseOptions{For: -time.Second}, "must not be negative"},
		{"a", PauseOptions{Reason: strings.Repeat("r", 1001)}, "at most 1000 bytes"},
	} {
		if err := Pause(ctx, db, tc.typ, tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Pause(%q, %+v) = %v, want an error containing %q", tc.typ, tc.o, err, tc.want)
		}
	}
	if err := Resume(ctx, db, ""); err == nil {
		t.Error("Resume of an empty type: nil error, want one")
	}
	// Pausing twice replaces the reason; a type with no rows can be paused.
	if err := Pause(ctx, db, "none yet", PauseOptions{Reason: "one"}); err != nil {
		t.Fatal(err)
	}
	if err := Pause(ctx, db, "none yet", PauseOptions{Reason: "two\x1b[2J"}); err != nil {
		t.Fatal(err)
	}
	ps, err := Pauses(ctx, db)
	if err != nil || len(ps) != 1 || ps[0].Reason != "two\x1b[2J" {
		t.Errorf("Pauses = %+v, %v; want one pause with the second reason, byte for byte", ps, err)
	}
}
