package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"testing"
	"time"
)

// Wake(db) after a commit outside InTx starts the delivery at once: the worker polls once an
// hour, so only the wake can bring the message to its handler within the wait. A second pool
// gets its own worker, which the wake of the first must not reach.
func TestWakeAfterCommitDeliversAtOnce(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	delivered := make(chan MessageID, 4)
	r := NewRouter()
	r.Handle("woken", Policy{}, func(_ context.Context, _ json.RawMessage, d Delivery) error {
		delivered <- d.MessageID
		return nil
	})
	w := newTestWorker(t, db.DB, r, idleWorkerConfig(Config{}))
	other := db.Open(t)
	otherW := newTestWorker(t, other, r, idleWorkerConfig(Config{}))
	start(t, w)
	start(t, otherW)
	waitIdle(t, w)
	otherClaims := waitIdle(t, otherW)

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	id, err := Enqueue(ctx, tx, Message{EventType: "woken", Payload: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	Wake(db.DB)
	select {
	case got := <-delivered:
		if got != id {
			t.Fatalf("delivered %d, want %d", got, id)
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("message %d not delivered within 15s of Wake (the worker polls once an hour)", id)
	}
	if n := otherW.claims.Load(); n != otherClaims {
		t.Errorf("the worker on another pool claimed %d times after its first claim, want 0: Wake reached it", n-otherClaims)
	}
	Wake(nil)
	Wake(&sql.DB{}) // no worker runs on it: nothing happens
}
