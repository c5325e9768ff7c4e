package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/internal/testutil"
)

// provider is a handler whose calls are recorded and that fails while down is set.
type provider struct {
	down  atomic.Bool
	perm  bool // fail with a permanent error
	mu    sync.Mutex
	calls []providerCall
}

type providerCall struct {
	id      MessageID
	attempt int
	at      time.Time
}

func (p *provider) handler(_ context.Context, _ json.RawMessage, d Delivery) error {
	p.mu.Lock()
	p.calls = append(p.calls, providerCall{id: d.MessageID, attempt: d.Attempt, at: time.Now()})
	p.mu.Unlock()
	switch {
	case !p.down.Load():
		return nil
	case p.perm:
		return Permanent(errors.New("rejected\nby the provider \xff"))
	default:
		return errors.New("provider unavailable\n\x1b[31mred\xff")
	}
}

func (p *provider) list() []providerCall {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]providerCall(nil), p.calls...)
}

func (p *provider) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.calls)
}

// countAttrs counts the records with message msg whose attribute key has value val.
func (l *logRecords) countWith(msg, key, val string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.all {
		if r.Message != msg {
			continue
		}
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == key && a.Value.String() == val {
				n++
			}
			return true
		})
	}
	return n
}

const (
	msgCircuitOpened = "outbox circuit opened; the event type is backed off as a whole and probed"
	msgCircuitClosed = "outbox circuit closed; the event type is claimed again"
	msgHandlerFailed = "outbox handler failed"
)

var fastRetry = Policy{MaxAttempts: 1000, Backoff: Backoff{Initial: 20 * time.Millisecond, Max: 80 * time.Millisecond}}

// Five distinct messages failing open the circuit of their type. Once it is open, the type is
// not claimed but for one probe at a time, with a growing wait between probes, while another
// type is delivered as before. The hand-off leaves the type PENDING, the log has one line for
// the opening and one for the closing and none per attempt meanwhile, and Stats shows the type
// failing. A probe's success closes the circuit and every message is delivered.
func TestCircuitOpensAtFiveMessagesAndAProbeClosesIt(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	mail := &provider{}
	mail.down.Store(true)
	sms := make(handled, 64)
	r := NewRouter()
	r.Handle("mail", fastRetry, mail.handler)
	r.Handle("sms", Policy{}, sms.handler)
	logs := &logRecords{}
	w := newTestWorker(t, db.DB, r, Config{Concurrency: 8, Logger: slog.New(logs)})
	w.circuits.changed.Init(t)
	start(t, w)

	mailIDs := enqueueCommitted(t, db.DB, "mail", "mail", "mail", "mail", "mail")
	if !w.circuits.changed.WaitFor(20 * time.Second) {
		t.Fatal("the circuit closed, want it opened")
	}
	opened := time.Now()
	if got := w.CircuitOpen(); len(got) != 1 || got[0] != "mail" {
		t.Fatalf("CircuitOpen = %v, want [mail]", got)
	}
	attrs, _ := logs.find(msgCircuitOpened)
	if attrs["event_type"] != "mail" || attrs["messages_failed"] != "5" || attrs["messages_waiting"] != "5" || attrs["failing_since"] == "" {
		t.Errorf("opening line's attributes %v, want event_type mail, 5 messages failed and 5 waiting", attrs)
	}
	callsAtOpen := mail.count()
	failedLines := logs.countWith(msgHandlerFailed, "event_type", "mail")

	// Another type goes on as before.
	smsIDs := enqueueCommitted(t, db.DB, "sms", "sms", "sms")
	sms.wait(t, smsIDs...)
	// The hand-off leaves an open type for a claim.
	err := InTx(ctx, db.DB, func(tx *sql.Tx) error {
		id, err := Enqueue(ctx, tx, Message{EventType: "mail", Payload: json.RawMessage(`{}`)})
		if err != nil {
			return err
		}
		mailIDs = append(mailIDs, id)
		if st, _ := statusIn(t, tx, id); st != "PENDING" {
			t.Errorf("a message of an open type enqueued in InTx is %s, want PENDING for a claim", st)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The failures' results are written a moment after the handlers return.
	var snap Snapshot
	testutil.Eventually(t, 10*time.Second, "Stats to show mail alone failing", func() bool {
		if snap, err = Stats(ctx, db); err != nil {
			t.Fatal(err)
		}
		return snap.ByType["mail"].Failing && !snap.ByType["sms"].Failing && len(snap.Failing) == 1
	})

	// Two probes, one at a time, the second after a longer wait than the first.
	testutil.Eventually(t, 20*time.Second, "two probes", func() bool { return mail.count() >= callsAtOpen+2 })
	calls := mail.list()
	p1, p2 := calls[callsAtOpen], calls[callsAtOpen+1]
	if d := p1.at.Sub(opened); d < circuitProbeFirst-100*time.Millisecond {
		t.Errorf("first probe %s after the opening, want about %s", d, circuitProbeFirst)
	}
	if d := p2.at.Sub(p1.at); d < 2*circuitProbeFirst-100*time.Millisecond {
		t.Errorf("second probe %s after the first, want at least %s", d, 2*circuitProbeFirst)
	}
	if n := logs.countWith(msgHandlerFailed, "event_type", "mail"); n != failedLines {
		t.Errorf("%d per-attempt failure lines while the circuit was open, want none", n-failedLines)
	}
	// Every message's attempts are its handler calls: those not probed spent none while open.
	perMsg := map[MessageID]int{}
	for _, c := range mail.list() {
		perMsg[c.id]++
	}
	for _, id := range mailIDs {
		if got := getRow(t, db, id).Attempts; got != perMsg[id] {
			t.Errorf("message %d: %d attempts, %d handler calls", id, got, perMsg[id])
		}
	}

	mail.down.Store(false)
	if w.circuits.changed.WaitFor(20 * time.Second) {
		t.Fatal("the circuit opened again, want it closed")
	}
	testutil.Eventually(t, 20*time.Second, "every mail message SENT", func() bool {
		return countRows(t, db, "event_type = 'mail' AND status = 'SENT'") == len(mailIDs)
	})
	if o, c := logs.count(msgCircuitOpened), logs.count(msgCircuitClosed); o != 1 || c != 1 {
		t.Errorf("%d opening and %d closing lines, want one of each", o, c)
	}
	if len(w.CircuitOpen()) != 0 {
		t.Errorf("CircuitOpen = %v after the probe's success, want none", w.CircuitOpen())
	}
}

// One message failing again and again never opens the circuit, however many times: its retries
// keep the backoff they had, each wait at least the policy's.
func TestCircuitStaysClosedForOneMessagesRetries(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	mail := &provider{}
	mail.down.Store(true)
	r := NewRouter()
	r.Handle("mail", fastRetry, mail.handler)
	logs := &logRecords{}
	w := newTestWorker(t, db.DB, r, Config{Logger: slog.New(logs)})
	start(t, w)

	id := enqueueCommitted(t, db.DB, "mail")[0]
	testutil.Eventually(t, 20*time.Second, "eight attempts", func() bool { return mail.count() >= 8 })
	if got := w.CircuitOpen(); len(got) != 0 {
		t.Fatalf("CircuitOpen = %v after one message's retries, want none", got)
	}
	calls := mail.list()
	for i := 1; i < 8; i++ {
		b := min(fastRetry.Backoff.Initial<<(calls[i-1].attempt-1), fastRetry.Backoff.Max)
		if d := calls[i].at.Sub(calls[i-1].at); d < b || calls[i].attempt != calls[i-1].attempt+1 || calls[i].id != id {
			t.Errorf("attempt %d came %s after attempt %d, want at least the backoff %s", calls[i].attempt, d, calls[i-1].attempt, b)
		}
	}
	if n := logs.countWith(msgHandlerFailed, "event_type", "mail"); n < 8 {
		t.Errorf("%d failure lines for 8 failed attempts, want one each while the circuit is closed", n)
	}
	if n := logs.count(msgCircuitOpened); n != 0 {
		t.Errorf("%d opening lines, want none", n)
	}
}

// Permanent errors, as undecodable payloads give, say nothing about the provider and never open
// the circuit.
func TestCircuitIgnoresPermanentErrors(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	mail := &provider{perm: true}
	mail.down.Store(true)
	r := NewRouter()
	r.Handle("mail", fastRetry, mail.handler)
	r.Handle("undecodable", fastRetry, func(_ context.Context, payload json.RawMessage, _ Delivery) error {
		var v struct{ N int }
		if err := json.Unmarshal(payload, &v); err != nil {
			return Permanent(fmt.Errorf("decode: %w", err)) // as generated handlers do
		}
		return nil
	})
	w := newTestWorker(t, db.DB, r, Config{})
	start(t, w)

	enqueueCommitted(t, db.DB, "mail", "mail", "mail", "mail", "mail", "mail")
	ctx := context.Background()
	for i := 0; i < 6; i++ {
		if _, err := Enqueue(ctx, db, Message{EventType: "undecodable", Payload: json.RawMessage(`{"N":"x"}`)}, Standalone()); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, 20*time.Second, "twelve FAILED", func() bool { return countRows(t, db, "status = 'FAILED'") == 12 })
	if got := w.CircuitOpen(); len(got) != 0 {
		t.Fatalf("CircuitOpen = %v after permanent errors, want none", got)
	}
}

// lagRecorder is a LagObserver.
type lagRecorder struct {
	NopObserver
	mu   sync.Mutex
	lags map[string][]time.Duration
}

func (l *lagRecorder) DeliveryLag(eventType string, lag time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lags == nil {
		l.lags = map[string][]time.Duration{}
	}
	l.lags[eventType] = append(l.lags[eventType], lag)
}

func (l *lagRecorder) of(eventType string) []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]time.Duration(nil), l.lags[eventType]...)
}

// The delivery lag counts from created_at on the database clock: a row enqueued an hour ago
// by that clock has an hour of lag, whatever the local clock says. A handed-off message has
// the little lag of its transaction.
func TestDeliveryLagIsOnTheDatabaseClock(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	got := make(handled, 8)
	r := NewRouter()
	r.Handle("old", Policy{}, got.handler)
	r.Handle("new", Policy{}, got.handler)
	lags := &lagRecorder{}
	id := enqueueCommitted(t, db.DB, "old")[0]
	if _, err := db.Exec("UPDATE outbox_messages SET created_at = created_at - INTERVAL 1 HOUR WHERE id = ?", id); err != nil {
		t.Fatal(err)
	}
	w := newTestWorker(t, db.DB, r, Config{Observer: lags})
	start(t, w)
	got.wait(t, id)
	if l := lags.of("old"); len(l) != 1 || l[0] < time.Hour || l[0] > time.Hour+time.Minute {
		t.Errorf("lag of a message enqueued an hour ago: %v, want one of about an hour", l)
	}
	var hid MessageID
	err := InTx(ctx, db.DB, func(tx *sql.Tx) (err error) {
		hid, err = Enqueue(ctx, tx, Message{EventType: "new", Payload: json.RawMessage(`{}`)})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	got.wait(t, hid)
	testutil.Eventually(t, 10*time.Second, "the handed-off message's lag", func() bool { return len(lags.of("new")) == 1 })
	if l := lags.of("new")[0]; l < 0 || l > 10*time.Second {
		t.Errorf("lag of a handed-off message: %s, want under 10s", l)
	}
}
