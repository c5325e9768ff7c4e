package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
)

// TestDrainGivesBackWhenContextEnds: the handler running when ctx ends keeps its result; the
// rows claimed with it but not handled go back to PENDING, due at once, no attempt spent, so
// nothing waits for a lease.
func TestDrainGivesBackWhenContextEnds(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ids := enqueueN(t, db.DB, "drain.give", 3)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var handled []MessageID
	r := NewRouter()
	r.Handle("drain.give", Policy{}, func(_ context.Context, _ json.RawMessage, d Delivery) error {
		handled = append(handled, d.MessageID)
		cancel()
		return nil
	})
	w := newTestWorker(t, db.DB, r, Config{})

	counts, err := w.Drain(ctx, DrainOptions{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Drain after ctx ended returned %v, want context.Canceled", err)
	}
	if counts != (DrainCounts{Sent: 1}) || len(handled) != 1 {
		t.Fatalf("Drain = %+v with %d handler calls, want the one running handler sent", counts, len(handled))
	}
	for _, id := range ids {
		row := getRow(t, db, id)
		switch {
		case id == handled[0]:
			if row.Status != "SENT" {
				t.Errorf("handled message %d is %s, want SENT", id, row.Status)
			}
		case row.Status != "PENDING" || row.Attempts != 0 || row.NextAttemptAt.After(dbNow(t, db)):
			t.Errorf("unhandled message %d is %s, attempts %d, due %v: want PENDING, 0 attempts, due now",
				id, row.Status, row.Attempts, row.NextAttemptAt)
		}
	}
	if n := countRows(t, db, "status = 'PENDING'"); n != 2 {
		t.Fatalf("%d PENDING after the drain, want 2", n)
	}
	// Another Drain delivers them.
	if counts, err := w.Drain(context.Background(), DrainOptions{}); err != nil || counts != (DrainCounts{Sent: 2}) {
		t.Fatalf("second Drain = %+v, %v; want the 2 given back sent", counts, err)
	}
}

// TestDrainRefusesWhileRunning: a Worker's Drain and Run never share its state.
func TestDrainRefusesWhileRunning(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	r := NewRouter()
	r.Handle("drain.run", Policy{}, func(context.Context, json.RawMessage, Delivery) error { return nil })
	w := newTestWorker(t, db.DB, r, Config{})
	s := signals(t, w)
	stop := start(t, w)
	s.awaitClaims(1)
	if _, err := w.Drain(context.Background(), DrainOptions{}); err == nil {
		t.Fatal("Drain while Run runs returned nil, want an error")
	}
	stop()
	if _, err := w.Drain(context.Background(), DrainOptions{}); err != nil {
		t.Fatalf("Drain after Run returned: %v", err)
	}
}
