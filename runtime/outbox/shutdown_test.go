package outbox

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/internal/faultdriver"
)

// A graceful shutdown that cancels a slow handler on its last attempt must not make the message
// FAILED with "context canceled": the attempt is given back and the message is due again.
func TestShutdownCutOffOnLastAttemptIsNotFailed(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	started := make(chan struct{}, 1)
	r := NewRouter()
	r.Handle("last_try", Policy{MaxAttempts: 1, Timeout: 30 * time.Second}, func(ctx context.Context, _ json.RawMessage, _ Delivery) error {
		started <- struct{}{}
		<-ctx.Done()
		return fmt.Errorf("provider call: %w", ctx.Err())
	})
	id, err := Enqueue(context.Background(), db, Message{EventType: "last_try", Payload: json.RawMessage(`{}`), MaxAttempts: 1}, Standalone())
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, newTestWorker(t, db.DB, r, Config{ShutdownTimeout: 200 * time.Millisecond}))
	<-started
	stop()
	row := getRow(t, db, id)
	if row.Status != "PENDING" || row.Attempts != 0 || row.LastError.Valid {
		t.Errorf("message cut off by shutdown on its only attempt: %s, attempts %d, last_error %q; want PENDING, 0, none",
			row.Status, row.Attempts, row.LastError.String)
	}
}

// ShutdownTimeout bounds Run even when the database stops answering during the last result
// writes; the rows stay PROCESSING and are reclaimed after their lease, so nothing is lost.
// The fault driver makes every result write hang (a database that accepts and never answers).
func TestShutdownBoundedWhenDatabaseHangs(t *testing.T) {
	t.Parallel()
	d, inj, db := faultyDB(t)
	handled := make(chan struct{}, 1)
	r := NewRouter()
	r.Handle("hang_write", Policy{}, func(context.Context, json.RawMessage, Delivery) error {
		handled <- struct{}{}
		return nil
	})
	w := newTestWorker(t, db, r, Config{ShutdownTimeout: 500 * time.Millisecond})
	inj.Add(faultdriver.Rule{Match: `SET status\s+= 'SENT'`, Delay: time.Hour})
	id := enqueueN(t, d.DB, "hang_write", 1)[0]
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx) }()
	<-handled
	began := time.Now()
	cancel()
	select {
	case err := <-errc:
		if took := time.Since(began); took > 500*time.Millisecond+shutdownGrace+3*time.Second {
			t.Errorf("Run returned %v after cancel with a hanging database, want about ShutdownTimeout (500ms)", took)
		}
		if err != nil {
			t.Errorf("Run = %v, want nil", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Run did not return within a minute of cancel while result writes hang (ShutdownTimeout 500ms)")
	}
	if s := statusOf(t, d, id); s != "PROCESSING" {
		t.Errorf("message whose result could not be written: %s, want PROCESSING (reclaimed after its lease)", s)
	}
}
