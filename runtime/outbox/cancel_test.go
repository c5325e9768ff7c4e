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

// Cancel by id and by type: the dry run counts and changes nothing, PENDING rows become
// CANCELLED, and a worker then delivers the rest and never claims a cancelled row.
func TestCancelByIDAndType(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	xs := enqueueCommitted(t, db.DB, "x", "x", "x")
	ys := enqueueCommitted(t, db.DB, "y", "y")

	if n, err := Cancel(ctx, db, Filter{IDs: []MessageID{xs[0]}, DryRun: true}); err != nil || n != 1 {
		t.Fatalf("dry run by id = %d, %v; want 1", n, err)
	}
	if n, err := Cancel(ctx, db, Filter{EventType: "y", DryRun: true}); err != nil || n != 2 {
		t.Fatalf("dry run by type = %d, %v; want 2", n, err)
	}
	if n := countRows(t, db, "status = 'PENDING'"); n != 5 {
		t.Fatalf("%d PENDING rows after dry runs, want 5 (a dry run changes nothing)", n)
	}
	if n, err := Cancel(ctx, db, Filter{IDs: []MessageID{xs[0]}}); err != nil || n != 1 {
		t.Fatalf("Cancel by id = %d, %v; want 1", n, err)
	}
	if n, err := Cancel(ctx, db, Filter{EventType: "y"}); err != nil || n != 2 {
		t.Fatalf("Cancel by type = %d, %v; want 2", n, err)
	}
	if n, err := Cancel(ctx, db, Filter{EventType: "y"}); err != nil || n != 0 {
		t.Errorf("Cancel again = %d, %v; want 0", n, err)
	}
	// An id of another type is left alone when the type is given.
	if n, err := Cancel(ctx, db, Filter{IDs: []MessageID{xs[1]}, EventType: "y"}); err != nil || n != 0 {
		t.Errorf("Cancel of an x id with type y = %d, %v; want 0", n, err)
	}
	if n := countRows(t, db, "status = 'CANCELLED' AND cancelled_at IS NOT NULL"); n != 3 {
		t.Fatalf("%d CANCELLED rows with cancelled_at, want 3", n)
	}
	s, err := Stats(ctx, db)
	if err != nil || s.Cancelled != 3 || s.ByType["y"].Cancelled != 2 || s.Pending != 2 {
		t.Errorf("Stats = %+v, %v; want 3 cancelled (2 of y), 2 pending", s, err)
	}

	got := make(handled, 16)
	r := NewRouter()
	r.Handle("x", Policy{}, got.handler)
	r.Handle("y", Policy{}, got.handler)
	w := newTestWorker(t, db.DB, r, Config{})
	start(t, w)
	got.wait(t, xs[1], xs[2])
	// The claim that took xs[1] and xs[2] saw every committed row: none of the cancelled ones.
	if n := countRows(t, db, "status = 'CANCELLED' AND attempts = 0 AND claim_token IS NULL"); n != 3 {
		t.Errorf("%d cancelled rows untouched by the worker, want 3", n)
	}
	for _, id := range append([]MessageID{xs[0]}, ys...) {
		if st := statusOf(t, db, id); st != "CANCELLED" {
			t.Errorf("message %d is %s, want CANCELLED", id, st)
		}
	}
	// The reclaim touches only PROCESSING rows.
	if n, err := q.MessageReclaimStale(ctx, db, 1000); err != nil || n != 0 {
		t.Errorf("reclaim = %d, %v; want 0", n, err)
	}
}

func TestCancelArgumentErrors(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	for _, f := range []Filter{{}, {DryRun: true}, {EventType: "x", FailedWithin: time.Hour}, {IDs: []MessageID{1}, Newest: true}} {
		if _, err := Cancel(ctx, db, f); err == nil {
			t.Errorf("Cancel(%+v): nil error, want one", f)
		}
	}
}

// A message running when it is cancelled finishes its attempt. A retryable failure then makes
// it CANCELLED instead of PENDING, and it is never tried again. For an ordered message this
// releases its key: the key's next message is delivered. A success stays SENT.
func TestCancelRunningMessageEndsCancelled(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	started := make(chan MessageID, 4)
	release := make(chan error)
	var mu sync.Mutex
	calls := map[MessageID]int{}
	r := NewRouter()
	r.Handle("slow", Policy{}, func(ctx context.Context, _ json.RawMessage, d Delivery) error {
		mu.Lock()
		calls[d.MessageID]++
		mu.Unlock()
		started <- d.MessageID
		return <-release
	})
	w := newTestWorker(t, db.DB, r, Config{})
	start(t, w)

	for _, tc := range []struct {
		name    string
		ordered bool
		result  error
		want    string
	}{
		{"retryable failure", false, errors.New("provider down"), "CANCELLED"},
		{"ordered retryable failure", true, errors.New("provider down"), "CANCELLED"},
		{"success", false, nil, "SENT"},
	} {
		var ids []MessageID
		err := InTx(ctx, db.DB, func(tx *sql.Tx) error {
			for i := 0; i < 2; i++ {
				m := Message{EventType: "slow", Payload: json.RawMessage(`{}`)}
				if tc.ordered {
					m.OrderingKey = "cancel:" + tc.name
				}
				id, err := Enqueue(ctx, tx, m)
				if err != nil {
					return err
				}
				ids = append(ids, id)
				if !tc.ordered {
					break
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := <-started; got != ids[0] {
			t.Fatalf("%s: handler started for %d, want %d", tc.name, got, ids[0])
		}
		if st := statusOf(t, db, ids[0]); st != "PROCESSING" {
			t.Fatalf("%s: running message is %s, want PROCESSING", tc.name, st)
		}
		if n, err := Cancel(ctx, db, Filter{IDs: []MessageID{ids[0]}}); err != nil || n != 1 {
			t.Fatalf("%s: Cancel of a running message = %d, %v; want 1", tc.name, n, err)
		}
		if st := statusOf(t, db, ids[0]); st != "PROCESSING" {
			t.Fatalf("%s: cancelled running message is %s before its attempt ends, want PROCESSING", tc.name, st)
		}
		release <- tc.result
		testutil.Eventually(t, 20*time.Second, tc.name+": the attempt's result", func() bool { return statusOf(t, db, ids[0]) != "PROCESSING" })
		if st := statusOf(t, db, ids[0]); st != tc.want {
			t.Errorf("%s: message is %s after its attempt, want %s", tc.name, st, tc.want)
		}
		if tc.ordered {
			// The key's next message becomes its head and is delivered.
			select {
			case got := <-started:
				if got != ids[1] {
					t.Fatalf("%s: next handler for %d, want the key's next message %d", tc.name, got, ids[1])
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("%s: the key's next message was not delivered after its head was cancelled", tc.name)
			}
			release <- nil
			testutil.Eventually(t, 20*time.Second, tc.name+": next message SENT", func() bool { return statusOf(t, db, ids[1]) == "SENT" })
		}
	}
	// No cancelled message was tried again.
	mu.Lock()
	defer mu.Unlock()
	for id, n := range calls {
		if n != 1 {
			t.Errorf("message %d handled %d times, want once", id, n)
		}
	}
}

// A PENDING ordered head that is cancelled releases its key at once.
func TestCancelOrderedHeadReleasesItsKey(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	var ids []MessageID
	err := InTx(ctx, db.DB, func(tx *sql.Tx) error {
		for i := 0; i < 3; i++ {
			id, err := Enqueue(ctx, tx, Message{EventType: "o", Payload: json.RawMessage(`{}`), OrderingKey: "k"})
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
	if n, err := Cancel(ctx, db, Filter{IDs: []MessageID{ids[0]}}); err != nil || n != 1 {
		t.Fatalf("Cancel of the head = %d, %v; want 1", n, err)
	}
	var queued int
	if err := db.QueryRow("SELECT COUNT(*) FROM outbox_ordering_queue WHERE message_id = ?", ids[0]).Scan(&queued); err != nil || queued != 0 {
		t.Fatalf("cancelled head's queue entries = %d, %v; want 0", queued, err)
	}
	got := make(handled, 16)
	r := NewRouter()
	r.Handle("o", Policy{}, got.handler)
	start(t, newTestWorker(t, db.DB, r, Config{}))
	got.wait(t, ids[1], ids[2])
	if st := statusOf(t, db, ids[0]); st != "CANCELLED" {
		t.Errorf("cancelled head is %s, want CANCELLED", st)
	}
	if s, err := Stats(ctx, db); err != nil || s.HeldKeys != 0 || s.BrokenKeys != 0 {
		t.Errorf("Stats = %+v, %v; want no held or broken key", s, err)
	}
	if !strings.Contains(string(StatusCancelled), "CANCELLED") {
		t.Errorf("StatusCancelled = %q", StatusCancelled)
	}
}

// A message cancelled while it ran, whose worker then died, is reclaimed as CANCELLED: the
// reclaim never makes it PENDING again for another attempt.
func TestCancelledRunningMessageReclaimedAsCancelled(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	r := NewRouter()
	r.Handle("dies", Policy{Timeout: 50 * time.Millisecond}, func(context.Context, json.RawMessage, Delivery) error { return nil })
	w := newTestWorker(t, db.DB, r, Config{StaleAfter: 200 * time.Millisecond})
	id := enqueueN(t, db.DB, "dies", 1)[0]
	if got, _, err := w.claim(ctx, 1, claimPos{}); err != nil || len(got) != 1 {
		t.Fatalf("claim: %v %v", got, err)
	}
	if n, err := Cancel(ctx, db, Filter{EventType: "dies"}); err != nil || n != 1 {
		t.Fatalf("Cancel of the running message = %d, %v; want 1", n, err)
	}
	awaitLeaseExpired(t, db.DB, id)
	if n, err := w.reclaimOnce(ctx); err != nil || n != 1 {
		t.Fatalf("reclaimOnce = %d, %v; want 1", n, err)
	}
	row := getRow(t, db, id)
	if row.Status != "CANCELLED" || row.FailedAt.Valid || !strings.Contains(row.LastError.String, "cancelled while it ran") {
		t.Fatalf("reclaimed row %+v, want CANCELLED, no failed_at, last_error saying it was cancelled", row)
	}
	if got, _, err := w.claim(ctx, 1, claimPos{}); err != nil || len(got) != 0 {
		t.Errorf("claim after the reclaim: %d rows, %v; want none", len(got), err)
	}
}

// A claimed message whose handler never started, cancelled meanwhile, is given back at
// shutdown as CANCELLED, not PENDING for another worker.
func TestCancelledUnstartedMessageGivenBackAsCancelled(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	r := NewRouter()
	r.Handle("later", Policy{}, func(context.Context, json.RawMessage, Delivery) error { return nil })
	w := newTestWorker(t, db.DB, r, Config{})
	ids := enqueueN(t, db.DB, "later", 2)
	got, _, err := w.claim(ctx, 2, claimPos{})
	if err != nil || len(got) != 2 {
		t.Fatalf("claim: %v %v", got, err)
	}
	if n, err := Cancel(ctx, db, Filter{IDs: ids[:1]}); err != nil || n != 1 {
		t.Fatalf("Cancel = %d, %v; want 1", n, err)
	}
	w.giveBackUnstarted(ctx, got)
	if st := statusOf(t, db, ids[0]); st != "CANCELLED" {
		t.Errorf("cancelled unstarted message given back %s, want CANCELLED", st)
	}
	if st := statusOf(t, db, ids[1]); st != "PENDING" {
		t.Errorf("other unstarted message given back %s, want PENDING", st)
	}
}
