package outboxkafka_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outboxgen/outboxgen/runtime/outbox"
	"github.com/outboxgen/outboxgen/runtime/outboxkafka"
)

// The relay end to end: messages enqueued in a real database, a real worker, a kfake cluster.
// Each test has its own database and its own cluster.

// checkOnce fails the test unless recs hold exactly one record per message of keys, each with
// its idempotency key as the record key, and nothing else.
func checkOnce(t *testing.T, recs []*kgo.Record, keys map[outbox.MessageID]string) {
	t.Helper()
	seen := map[outbox.MessageID]int{}
	for _, r := range recs {
		id := messageID(t, r)
		want, ok := keys[id]
		if !ok {
			t.Errorf("record %s/%d@%d is message %d, which the test did not enqueue", r.Topic, r.Partition, r.Offset, id)
		}
		if string(r.Key) != want || header(r, "outbox-idempotency-key") != want {
			t.Errorf("message %d: key %q, outbox-idempotency-key %q, want %q", id, r.Key, header(r, "outbox-idempotency-key"), want)
		}
		seen[id]++
	}
	for id := range keys {
		if seen[id] != 1 {
			t.Errorf("message %d is in Kafka %d times, want exactly once", id, seen[id])
		}
	}
	if len(recs) != len(keys) {
		t.Errorf("Kafka holds %d records, want %d", len(recs), len(keys))
	}
}

// N messages, some with an idempotency key and headers, relayed by a worker with concurrency:
// Kafka holds each once, on its event type's topic, with its payload, key and headers.
func TestRelayEveryMessageOnce(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	c := cluster(t, 4, "outbox.order_paid", "outbox.welcome_email")

	const n = 200
	keys := map[outbox.MessageID]string{}
	payloads := map[outbox.MessageID]string{}
	traces := map[outbox.MessageID]string{}
	for i := range n {
		eventType, key := "order_paid", fmt.Sprintf("order_paid:%d", i)
		var opts []outbox.EnqueueOption
		if i%2 == 1 {
			eventType, key = "welcome_email", ""
		}
		trace := fmt.Sprintf("00-%032x-%016x-01", i+1, i+1)
		opts = append(opts, outbox.Header("traceparent", trace))
		payload := fmt.Sprintf(`{"n": %d, "amount": 1234.50}`, i)
		id := db.enqueue(t, eventType, payload, key, opts...)
		if key == "" {
			key = fmt.Sprintf("msg:%d", id)
		}
		keys[id], payloads[id], traces[id] = key, payload, trace
	}

	relay := outbox.NewRouter()
	if err := outboxkafka.Register(relay, producer(t, c), outboxkafka.Types(fast, "order_paid", "welcome_email")); err != nil {
		t.Fatal(err)
	}
	startWorker(t, db.DB, relay, outbox.Config{Concurrency: 8})
	waitDrained(t, db, 60*time.Second)

	recs := consumeAll(t, c, n, "outbox.order_paid", "outbox.welcome_email")
	checkOnce(t, recs, keys)
	for _, r := range recs {
		id := messageID(t, r)
		if string(r.Value) != payloads[id] {
			t.Errorf("message %d: value %q, want %q", id, r.Value, payloads[id])
		}
		if r.Topic != "outbox."+header(r, "outbox-event-type") {
			t.Errorf("message %d: topic %q for event type %q", id, r.Topic, header(r, "outbox-event-type"))
		}
		if header(r, "traceparent") != traces[id] {
			t.Errorf("message %d: traceparent %q, want %q", id, header(r, "traceparent"), traces[id])
		}
		if header(r, "outbox-attempt") != "1" {
			t.Errorf("message %d: attempt %s, want 1 (nothing failed)", id, header(r, "outbox-attempt"))
		}
	}
}

// The cluster refuses produce requests with an error kgo does not retry: the messages in them
// go back to PENDING with their backoff, the next attempts produce them, and Kafka holds each
// once (a refused produce wrote nothing).
func TestRelayBrokerErrorRetried(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	c := cluster(t, 1, "outbox.order_paid")
	const n, refusals = 40, 5
	keys := map[outbox.MessageID]string{}
	for i := range n {
		key := fmt.Sprintf("order_paid:%d", i)
		keys[db.enqueue(t, "order_paid", `{}`, key)] = key
	}
	failed := failProduce(c, refusals, kerr.TopicAuthorizationFailed)

	relay := outbox.NewRouter()
	if err := outboxkafka.Register(relay, producer(t, c), outboxkafka.Types(fast, "order_paid")); err != nil {
		t.Fatal(err)
	}
	startWorker(t, db.DB, relay, outbox.Config{Concurrency: 4})
	waitDrained(t, db, 60*time.Second)

	if failed.Load() != refusals {
		t.Fatalf("%d produce requests refused, want %d", failed.Load(), refusals)
	}
	retries := 0
	for id := range keys {
		r := db.inspect(t, id)
		if r.Status != outbox.StatusSent {
			t.Errorf("message %d is %s, want SENT", id, r.Status)
		}
		retries += r.Attempts - 1
	}
	// Each refused request failed at least one record, and each failed record cost an attempt.
	if retries < refusals {
		t.Errorf("%d retries in all after %d refused produce requests, want at least as many", retries, refusals)
	}
	checkOnce(t, consumeAll(t, c, n, "outbox.order_paid"), keys)
}
