package outboxnats_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxgen/outboxgen/runtime/outbox"
	"github.com/outboxgen/outboxgen/runtime/outboxnats"
	"github.com/outboxgen/outboxgen/runtime/outboxrelay/relaytest"
)

// The relay end to end: messages enqueued in a real database, a real worker, a real
// nats-server. Each test has its own database and its own server.

// checkOnce fails the test unless the stream holds exactly one message per id in ids, each
// with its Nats-Msg-Id and outbox-message-id, and nothing else.
func checkOnce(t *testing.T, stream jetstream.Stream, keys map[outbox.MessageID]string) []*jetstream.RawStreamMsg {
	t.Helper()
	msgs := storedMsgs(t, stream)
	seen := map[string]int{}
	for _, m := range msgs {
		id, err := strconv.ParseInt(m.Header.Get("outbox-message-id"), 10, 64)
		if err != nil {
			t.Fatalf("stream message %d: outbox-message-id %q", m.Sequence, m.Header.Get("outbox-message-id"))
		}
		want, ok := keys[outbox.MessageID(id)]
		if !ok {
			t.Errorf("stream message %d is message %d, which the test did not enqueue", m.Sequence, id)
		}
		if got := m.Header.Get("Nats-Msg-Id"); got != want {
			t.Errorf("message %d: Nats-Msg-Id %q, want %q", id, got, want)
		}
		seen[m.Header.Get("outbox-message-id")]++
	}
	for id := range keys {
		if n := seen[strconv.FormatInt(int64(id), 10)]; n != 1 {
			t.Errorf("message %d is in the stream %d times, want exactly once", id, n)
		}
	}
	if len(msgs) != len(keys) {
		t.Errorf("stream holds %d messages, want %d", len(msgs), len(keys))
	}
	return msgs
}

// N messages, some with an idempotency key and headers, relayed by a worker with concurrency:
// the stream holds each exactly once, with its payload, key and headers.
func TestRelayEveryMessageOnce(t *testing.T) {
	t.Parallel()
	db := relaytest.NewDB(t)
	ns := startNATS(t)
	_, js := ns.connect(t)
	stream := createStream(t, js, "OUTBOX", time.Minute, "outbox.>")

	const n = 200
	keys := map[outbox.MessageID]string{}
	payloads := map[outbox.MessageID]string{}
	for i := range n {
		eventType, key := "order_paid", fmt.Sprintf("order_paid:%d", i)
		var opts []outbox.EnqueueOption
		if i%2 == 1 {
			eventType, key = "welcome_email", ""
			opts = append(opts, outbox.Header("traceparent", fmt.Sprintf("00-%032x-%016x-01", i+1, i+1)))
		}
		payload := fmt.Sprintf(`{"n": %d, "amount": 1234.50}`, i)
		id := db.Enqueue(t, eventType, payload, key, opts...)
		if key == "" {
			key = fmt.Sprintf("msg:%d", id)
		}
		keys[id], payloads[id] = key, payload
	}

	relay := outbox.NewRouter()
	if err := outboxnats.Register(relay, js, outboxnats.Types(relaytest.Fast, "order_paid", "welcome_email")); err != nil {
		t.Fatal(err)
	}
	w := relaytest.StartWorker(t, db.DB, relay, outbox.Config{Concurrency: 8})
	db.WaitDrained(t, 60*time.Second)
	w.Stop(t)

	for _, m := range checkOnce(t, stream, keys) {
		id, _ := strconv.ParseInt(m.Header.Get("outbox-message-id"), 10, 64)
		mid := outbox.MessageID(id)
		if string(m.Data) != payloads[mid] {
			t.Errorf("message %d: data %q, want %q", id, m.Data, payloads[mid])
		}
		if got := m.Header.Get("outbox-event-type"); m.Subject != "outbox."+got {
			t.Errorf("message %d: subject %q for event type %q", id, m.Subject, got)
		}
		if m.Header.Get("outbox-event-type") == "welcome_email" && m.Header.Get("traceparent") == "" {
			t.Errorf("message %d: the traceparent header did not travel", id)
		}
		if got := m.Header.Get("outbox-attempt"); got != "1" {
			t.Errorf("message %d: attempt %s, want 1 (nothing failed)", id, got)
		}
	}
}

// dupCounter wraps a Publisher as a handler and counts the acks JetStream gave as duplicates.
type dupCounter struct {
	p    *outboxnats.Publisher
	dups atomic.Int64
}

func (c *dupCounter) publish(ctx context.Context, payload json.RawMessage, d outbox.Delivery) error {
	ack, err := c.p.Publish(ctx, payload, d)
	if err == nil && ack.Duplicate {
		c.dups.Add(1)
	}
	return err
}

// A handler call that published but whose result was an error (the ack lost on the way back,
// say) is delivered again; the stream still holds the message once, because the second publish
// carries the same Nats-Msg-Id.
func TestRelayRedeliveryDeduplicated(t *testing.T) {
	t.Parallel()
	db := relaytest.NewDB(t)
	ns := startNATS(t)
	_, js := ns.connect(t)
	stream := createStream(t, js, "OUTBOX", time.Minute, "outbox.>")

	const n = 60
	keys := map[outbox.MessageID]string{}
	for i := range n {
		id := db.Enqueue(t, "order_paid", `{}`, fmt.Sprintf("order_paid:%d", i))
		keys[id] = fmt.Sprintf("order_paid:%d", i)
	}
	c := &dupCounter{p: outboxnats.New(js)}
	var lost atomic.Int64
	relay := outbox.NewRouter()
	relay.Handle("order_paid", relaytest.Fast, func(ctx context.Context, payload json.RawMessage, d outbox.Delivery) error {
		if err := c.publish(ctx, payload, d); err != nil {
			return err
		}
		if d.MessageID%3 == 0 && d.Attempt == 1 {
			lost.Add(1)
			return errors.New("test: published, then the result was lost")
		}
		return nil
	})
	relaytest.StartWorker(t, db.DB, relay, outbox.Config{Concurrency: 4})
	db.WaitDrained(t, 60*time.Second)

	checkOnce(t, stream, keys)
	if lost.Load() == 0 || c.dups.Load() != lost.Load() {
		t.Errorf("%d publishes lost their result and %d later publishes were acked as duplicates, want as many (and some)", lost.Load(), c.dups.Load())
	}
	for id := range keys {
		r := db.Inspect(t, id)
		want := 1
		if id%3 == 0 {
			want = 2
		}
		if r.Status != outbox.StatusSent || r.Attempts != want {
			t.Errorf("message %d: %s after %d attempts, want SENT after %d", id, r.Status, r.Attempts, want)
		}
	}
}

// A worker process killed (SIGKILL) after it published but before it recorded anything: its
// rows stay PROCESSING until their lease ends, another worker reclaims and publishes them
// again, and JetStream drops each second copy as a duplicate. The child is this test binary
// (see TestMain), so the kill is a real process death, not a cancelled context.
func TestRelayWorkerKilledMidRelay(t *testing.T) {
	t.Parallel()
	db := relaytest.NewDB(t)
	ns := startNATS(t)
	_, js := ns.connect(t)
	stream := createStream(t, js, "OUTBOX", 5*time.Minute, "outbox.>")

	const n = 30
	keys := map[outbox.MessageID]string{}
	for i := range n {
		key := ""
		if i%2 == 0 {
			key = fmt.Sprintf("order_paid:%d", i)
		}
		id := db.Enqueue(t, "order_paid", fmt.Sprintf(`{"i": %d}`, i), key)
		if key == "" {
			key = fmt.Sprintf("msg:%d", id)
		}
		keys[id] = key
	}

	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), childEnv+"=1", "CHILD_DSN="+db.DSN, "CHILD_NATS="+ns.url)
	child.Stderr = os.Stderr
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	published := map[outbox.MessageID]bool{}
	lines := bufio.NewScanner(out)
	for len(published) < childConcurrency && lines.Scan() {
		var id outbox.MessageID
		if _, err := fmt.Sscanf(lines.Text(), "published %d", &id); err == nil {
			published[id] = true
		}
	}
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for lines.Scan() { // a publish that was acked just before the kill
		var id outbox.MessageID
		if _, err := fmt.Sscanf(lines.Text(), "published %d", &id); err == nil {
			published[id] = true
		}
	}
	_ = child.Wait()
	if len(published) < childConcurrency {
		t.Fatalf("the child published %d messages before it died, want at least %d", len(published), childConcurrency)
	}
	for id := range keys {
		r := db.Inspect(t, id)
		if published[id] && r.Status != outbox.StatusProcessing {
			t.Fatalf("message %d was published by the killed worker and is %s, want PROCESSING (nothing recorded)", id, r.Status)
		}
		if r.Status == outbox.StatusSent {
			t.Fatalf("message %d is SENT, but the killed worker recorded nothing", id)
		}
	}

	// The restart: a new worker, whose reclaim returns the dead worker's rows once their lease ends.
	c := &dupCounter{p: outboxnats.New(js)}
	relay := outbox.NewRouter()
	relay.Handle("order_paid", relaytest.Fast, c.publish)
	relaytest.StartWorker(t, db.DB, relay, outbox.Config{Concurrency: 4, ReclaimInterval: 100 * time.Millisecond})
	db.WaitDrained(t, 60*time.Second)

	checkOnce(t, stream, keys)
	if got := c.dups.Load(); got != int64(len(published)) {
		t.Errorf("%d publishes acked as duplicates after the restart, want %d (one per message the killed worker published)", got, len(published))
	}
	for id := range published {
		if r := db.Inspect(t, id); r.Attempts != 2 {
			t.Errorf("message %d: %d attempts, want 2 (the killed claim counts)", id, r.Attempts)
		}
	}
}

// The NATS server stops: publishes fail (no ack within the ack timeout), each message goes back
// to PENDING with its backoff, and the type's circuit opens and probes; the server comes back with its stream and
// every message is delivered, each stored once (a publish buffered during the outage and its
// retry are one message).
func TestRelayNATSDown(t *testing.T) {
	t.Parallel()
	db := relaytest.NewDB(t)
	ns := startNATS(t)
	_, js := ns.connect(t)
	stream := createStream(t, js, "OUTBOX", 5*time.Minute, "outbox.>")

	policy := outbox.Policy{Backoff: outbox.Backoff{Initial: 100 * time.Millisecond, Max: 400 * time.Millisecond}, Timeout: 3 * time.Second}
	relay := outbox.NewRouter()
	if err := outboxnats.Register(relay, js, outboxnats.Types(policy, "order_paid"), outboxnats.WithAckTimeout(300*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	relaytest.StartWorker(t, db.DB, relay, outbox.Config{Concurrency: 4})

	keys := map[outbox.MessageID]string{}
	first := db.Enqueue(t, "order_paid", `{"before": true}`, "order_paid:before")
	keys[first] = "order_paid:before"
	relaytest.WaitFor(t, 30*time.Second, "the first message to be SENT", func() bool { return db.Inspect(t, first).Status == outbox.StatusSent })

	ns.stop()
	var during []outbox.MessageID
	for i := range 10 {
		key := fmt.Sprintf("order_paid:during:%d", i)
		id := db.Enqueue(t, "order_paid", fmt.Sprintf(`{"i": %d}`, i), key)
		keys[id] = key
		during = append(during, id)
	}
	// Messages are tried while the server is down, and wait their backoff. Once five have
	// failed, the type's circuit opens: the worker then tries one message now and then, a
	// probe, instead of spending every message's attempts.
	failed := map[outbox.MessageID]bool{}
	relaytest.WaitFor(t, 30*time.Second, "five messages failed, enough to open the circuit", func() bool {
		for _, id := range during {
			if r := db.Inspect(t, id); r.Status == outbox.StatusPending && r.LastError != "" {
				failed[id] = true
			}
		}
		return len(failed) >= 5
	})
	var sawBackoff bool
	for _, id := range during {
		r := db.Inspect(t, id)
		if r.Status == outbox.StatusSent || r.Status == outbox.StatusFailed {
			t.Fatalf("message %d is %s while the server is down", id, r.Status)
		}
		// A row claimed but not started when the circuit opened is given back with its attempt.
		if r.Status == outbox.StatusPending && r.Attempts > 0 {
			if r.LastError == "" {
				t.Errorf("message %d is PENDING after %d attempts without a last_error", id, r.Attempts)
			}
			if r.NextAttemptAt.After(r.ClaimedAt) {
				sawBackoff = true
			}
		}
	}
	if !sawBackoff {
		t.Error("no PENDING message waits for a next attempt after its last claim: no backoff seen")
	}

	ns.restart()
	db.WaitDrained(t, 60*time.Second)
	checkOnce(t, stream, keys)
	for id := range failed {
		if r := db.Inspect(t, id); r.Attempts < 2 {
			t.Errorf("message %d failed during the outage and was SENT after %d attempts, want its retry counted", id, r.Attempts)
		}
	}
}

// Messages with ordering keys, of two event types sharing the keys, enqueued by concurrent
// producers and relayed by a worker with 8 slots, some failing their first attempt after they
// were published (the duplicate is dropped) or before: every key's messages are in the stream
// in the order they were committed, each once.
func TestRelayOrderPerKey(t *testing.T) {
	t.Parallel()
	db := relaytest.NewDB(t)
	ns := startNATS(t)
	_, js := ns.connect(t)
	stream := createStream(t, js, "OUTBOX", time.Minute, "outbox.>")

	const producers, keysPer, perKey = 3, 2, 15
	keys := map[outbox.MessageID]string{}
	for _, id := range db.EnqueueOrderedRace(t, producers, keysPer, perKey, "orders:", func(seq int) string {
		return []string{"order_placed", "order_paid"}[seq%2]
	}) {
		keys[id] = fmt.Sprintf("msg:%d", id)
	}

	c := &dupCounter{p: outboxnats.New(js)}
	var flaky relaytest.Flaky
	relay := outbox.NewRouter()
	h := flaky.Wrap(c.publish)
	relay.Handle("order_placed", relaytest.Fast, h)
	relay.Handle("order_paid", relaytest.Fast, h)
	relaytest.StartWorker(t, db.DB, relay, outbox.Config{Concurrency: 8})
	db.WaitDrained(t, 60*time.Second)

	msgs := checkOnce(t, stream, keys)
	if c.dups.Load() != flaky.LostAfter.Load() || flaky.FailedBefore.Load() == 0 {
		t.Errorf("%d duplicate acks for %d publishes whose result was lost (and %d failures before publishing), want as many duplicates",
			c.dups.Load(), flaky.LostAfter.Load(), flaky.FailedBefore.Load())
	}
	next := map[string]int{}
	for _, m := range msgs {
		var v struct {
			Key string
			Seq int
		}
		if err := json.Unmarshal(m.Data, &v); err != nil {
			t.Fatal(err)
		}
		if got := m.Header.Get("outbox-ordering-key"); got != v.Key {
			t.Errorf("stream message %d: outbox-ordering-key %q, want %q", m.Sequence, got, v.Key)
		}
		if v.Seq != next[v.Key] {
			t.Errorf("stream message %d: %s seq %d, want seq %d (commit order per key)", m.Sequence, v.Key, v.Seq, next[v.Key])
		}
		next[v.Key] = v.Seq + 1
	}
	if len(next) != producers*keysPer {
		t.Errorf("%d keys in the stream, want %d", len(next), producers*keysPer)
	}
}

// Idempotency keys that nats.go's header rules would make equal (a CR or LF turned into a
// space, outer spaces trimmed) and keys outside printable ASCII: each message reaches the
// stream, under the Nats-Msg-Id that the encoding gives it, and the keys that were already safe
// keep their id, so the duplicate window holds across a rolling deploy of the relay.
func TestRelayDistinctKeysStayDistinct(t *testing.T) {
	t.Parallel()
	db := relaytest.NewDB(t)
	ns := startNATS(t)
	_, js := ns.connect(t)
	stream := createStream(t, js, "OUTBOX", time.Minute, "outbox.>")

	encoded := func(key string) string { return "~" + base64.RawURLEncoding.EncodeToString([]byte(key)) }
	cases := []struct{ key, id string }{
		{"order_paid:1", "order_paid:1"},
		{"inv 7", "inv 7"},
		{"inv\n7", encoded("inv\n7")},
		{"inv\r7", encoded("inv\r7")},
		{"inv\t7", encoded("inv\t7")},
		{"order-9", "order-9"},
		{"order-9 ", encoded("order-9 ")},
		{" order-9", encoded(" order-9")},
		{"~x", encoded("~x")},
		{"facture-n°7", encoded("facture-n°7")},
		{"", ""}, // no key: "msg:<id>", set below
	}
	keys := map[outbox.MessageID]string{}
	ids := map[outbox.MessageID]string{}
	notes := map[outbox.MessageID]string{}
	for i, c := range cases {
		var opts []outbox.EnqueueOption
		if !strings.ContainsAny(c.key, "\r\n") { // the core refuses CR and LF in a header value
			opts = append(opts, outbox.Header("note", c.key))
		}
		id := db.Enqueue(t, "order_paid", fmt.Sprintf(`{"i": %d}`, i), c.key, opts...)
		key, msgID := c.key, c.id
		if key == "" {
			key = fmt.Sprintf("msg:%d", id)
			msgID = key
		}
		keys[id], ids[id] = key, msgID
		if opts != nil {
			notes[id] = c.key
		}
	}

	relay := outbox.NewRouter()
	if err := outboxnats.Register(relay, js, outboxnats.Types(relaytest.Fast, "order_paid")); err != nil {
		t.Fatal(err)
	}
	w := relaytest.StartWorker(t, db.DB, relay, outbox.Config{Concurrency: 4})
	db.WaitDrained(t, 60*time.Second)
	w.Stop(t)

	for id, key := range keys {
		if r := db.Inspect(t, id); r.Status != outbox.StatusSent {
			t.Errorf("message %d (key %q) is %s, want SENT", id, key, r.Status)
		}
	}
	for _, m := range checkOnce(t, stream, ids) {
		id, _ := strconv.ParseInt(m.Header.Get("outbox-message-id"), 10, 64)
		mid := outbox.MessageID(id)
		for name, want := range map[string]string{"Nats-Msg-Id": keys[mid], "outbox-idempotency-key": keys[mid], "note": notes[mid]} {
			got, err := outboxnats.Decode(m.Header.Get(name))
			if err != nil || got != want {
				t.Errorf("message %d: %s %q decodes to %q (%v), want %q", id, name, m.Header.Get(name), got, err, want)
			}
		}
	}
}
