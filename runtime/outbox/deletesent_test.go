package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"sync"
	"testing"
	"time"
)

func queueEntries(t testing.TB, db *sql.DB) int {
	t.Helper()
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM outbox_ordering_queue").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A success of a DeleteWhenSent type deletes its row, unordered and ordered alike (the key's
// queue entries go and its messages run in order), and Drain counts it as sent; another type's
// success stays SENT.
func TestDeleteWhenSentDrain(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	var mu sync.Mutex
	var order []MessageID
	h := func(_ context.Context, _ json.RawMessage, d Delivery) error {
		mu.Lock()
		order = append(order, d.MessageID)
		mu.Unlock()
		return nil
	}
	r := NewRouter()
	r.Handle("dws", Policy{DeleteWhenSent: true}, h)
	r.Handle("dws_ordered", Policy{DeleteWhenSent: true}, h)
	r.Handle("keep", Policy{}, h)
	plain := enqueueN(t, db.DB, "dws", 3)
	kept := enqueueN(t, db.DB, "keep", 1)[0]
	var ordered []MessageID
	err := InTx(ctx, db.DB, func(tx *sql.Tx) error {
		for i := 0; i < 3; i++ {
			id, err := Enqueue(ctx, tx, Message{EventType: "dws_ordered", Payload: json.RawMessage(`{}`), OrderingKey: "k"})
			if err != nil {
				return err
			}
			ordered = append(ordered, id)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	w := newTestWorker(t, db.DB, r, Config{})
	counts, err := w.Drain(ctx, DrainOptions{})
	if err != nil || counts.Sent != 7 || counts.Retried != 0 || counts.Failed != 0 {
		t.Fatalf("Drain = %+v, %v; want 7 sent", counts, err)
	}
	for _, id := range append(plain, ordered...) {
		if exists(t, db, id) {
			t.Errorf("row %d of a DeleteWhenSent type is still there (%s)", id, statusOf(t, db, id))
		}
	}
	if st := statusOf(t, db, kept); st != "SENT" {
		t.Errorf("the other type's row is %s, want SENT", st)
	}
	if n := queueEntries(t, db.DB); n != 0 {
		t.Errorf("%d queue entries left, want 0", n)
	}
	var pos []int
	for i, id := range order {
		for _, o := range ordered {
			if id == o {
				pos = append(pos, i)
			}
		}
	}
	for i := 1; i < len(pos); i++ {
		if order[pos[i]] < order[pos[i-1]] {
			t.Errorf("ordered messages ran as %v", order)
		}
	}
	if s, err := Stats(ctx, db); err != nil || s.BrokenKeys != 0 || s.Pending != 0 || s.Processing != 0 {
		t.Errorf("Stats = %+v, %v; want nothing pending or broken", s, err)
	}
}

// Under Run, batches of results delete their rows in one transaction, and an ordered key's
// messages all run: each delete releases the key to the next.
func TestDeleteWhenSentRun(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	const n = 40
	done := make(chan MessageID, 2*n)
	h := func(_ context.Context, _ json.RawMessage, d Delivery) error {
		done <- d.MessageID
		return nil
	}
	r := NewRouter()
	r.Handle("dws", Policy{DeleteWhenSent: true}, h)
	ids := enqueueN(t, db.DB, "dws", n)
	err := InTx(ctx, db.DB, func(tx *sql.Tx) error {
		for i := 0; i < n; i++ {
			id, err := Enqueue(ctx, tx, Message{EventType: "dws", Payload: json.RawMessage(`{}`), OrderingKey: "k" + itoa(i%4)})
			if err != nil {
				return err
			}
			ids = append(ids, id)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	w := newTestWorker(t, db.DB, r, Config{})
	s := signals(t, w)
	start(t, w)
	for i := 0; i < 2*n; i++ {
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("%d of %d handled", i, 2*n)
		}
	}
	// The rows go with their results' writes: wait until none is left.
	for countRows(t, db, "event_type = 'dws'") > 0 {
		s.flushed.WaitOrTimeout()
	}
	if n := queueEntries(t, db.DB); n != 0 {
		t.Errorf("%d queue entries left, want 0", n)
	}
}

// The fence holds: a result for a row that a newer claim owns deletes nothing and is refused.
func TestDeleteWhenSentFenced(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	r := NewRouter()
	r.Handle("dws", Policy{DeleteWhenSent: true}, func(context.Context, json.RawMessage, Delivery) error { return nil })
	w := newTestWorker(t, db.DB, r, Config{})
	var ordered MessageID
	err := InTx(ctx, db.DB, func(tx *sql.Tx) error {
		var err error
		ordered, err = Enqueue(ctx, tx, Message{EventType: "dws", Payload: json.RawMessage(`{}`), OrderingKey: "k"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	plain := enqueueN(t, db.DB, "dws", 2)
	got, _, err := w.claim(ctx, 10, claimPos{})
	if err != nil || len(got) != 3 {
		t.Fatalf("claim = %d rows, %v; want 3", len(got), err)
	}
	// A newer claim took the ordered row and plain[0].
	if _, err := db.Exec("UPDATE outbox_messages SET claim_token = 'newer' WHERE id IN (?, ?)", ordered, plain[0]); err != nil {
		t.Fatal(err)
	}
	var batch []result
	for _, m := range got {
		batch = append(batch, result{id: m.id, eventType: m.eventType, token: m.token, outcome: OutcomeSent, orderingKey: m.orderingKey, orderingSeq: m.orderingSeq})
	}
	written, refused, err := w.writeResultsTx(ctx, batch)
	if err != nil || written != 1 || refused != 2 {
		t.Fatalf("writeResultsTx = %d written, %d refused, %v; want 1 and 2", written, refused, err)
	}
	if exists(t, db, plain[1]) {
		t.Error("the row this claim owned is still there")
	}
	for _, id := range []MessageID{ordered, plain[0]} {
		if st := statusOf(t, db, id); st != "PROCESSING" {
			t.Errorf("row %d of the newer claim is %s, want PROCESSING", id, st)
		}
	}
	if n := queueEntries(t, db.DB); n != 1 {
		t.Errorf("%d queue entries, want the newer claim's ordered row's 1", n)
	}
}
