package main

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/examples/events"
	"github.com/outboxgen/outboxgen/runtime/outboxtest"
)

// signalWriter keeps what the handler writes and closes wrote at the first write.
type signalWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	once  sync.Once
	wrote chan struct{}
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	defer w.once.Do(func() { close(w.wrote) })
	return w.buf.Write(p)
}

func (w *signalWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// The README's program commits a company with its mail, and its worker delivers the mail once:
// after Run returns, the one message is SENT and the handler ran once.
func TestQuickstart(t *testing.T) {
	// run is the README's program, its worker included: Drain would leave its Run untested.
	db := outboxtest.Open(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	defer stop()

	out := &signalWriter{wrote: make(chan struct{})}
	done := make(chan error, 1)
	go func() { done <- run(runCtx, db, out) }()
	select {
	case <-out.wrote:
	case err := <-done:
		t.Fatalf("run returned before the mail was delivered: %v", err)
	case <-ctx.Done():
		t.Fatal("no mail delivered within a minute")
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}

	if got, want := out.String(), "welcome mail to ops@acme.example (idempotency key welcome_email:1:1)\n"; got != want {
		t.Errorf("handler wrote %q, want %q", got, want)
	}
	outboxtest.RequireEnqueued(t, db, events.WelcomeEmail{CompanyID: 1, Email: "ops@acme.example"})
	// The kit reads payloads, not a message's status and attempts.
	var status string
	var msgs, attempts, companies int
	if err := db.QueryRow("SELECT COUNT(*), MIN(status), MIN(attempts) FROM outbox_messages").Scan(&msgs, &status, &attempts); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow("SELECT COUNT(*) FROM companies").Scan(&companies); err != nil {
		t.Fatal(err)
	}
	if msgs != 1 || status != "SENT" || attempts != 1 || companies != 1 {
		t.Errorf("%d message(s), %s after %d attempts, %d companies; want one message, SENT after 1, 1 company", msgs, status, attempts, companies)
	}
}
