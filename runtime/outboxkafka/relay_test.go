package outboxkafka_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outboxgen/outboxgen/runtime/outbox"
	"github.com/outboxgen/outboxgen/runtime/outboxkafka"
	"github.com/outboxgen/outboxgen/runtime/outboxrelay/relaytest"
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
// Kafka holds each once, on its event type's topic, with its payload, key and headers, in
// batches of the idempotent producer (kgo's default, which doc.go tells users to keep: the
// broker then drops the client's own resends of a batch).
func TestRelayEveryMessageOnce(t *testing.T) {
	t.Parallel()
	db := relaytest.NewDB(t)
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
		id := db.Enqueue(t, eventType, payload, key, opts...)
		if key == "" {
			key = fmt.Sprintf("msg:%d", id)
		}
		keys[id], payloads[id], traces[id] = key, payload, trace
	}

	relay := outbox.NewRouter()
	if err := outboxkafka.Register(relay, producer(t, c), outboxkafka.Types(relaytest.Fast, "order_paid", "welcome_email")); err != nil {
		t.Fatal(err)
	}
	relaytest.StartWorker(t, db.DB, relay, outbox.Config{Concurrency: 8})
	db.WaitDrained(t, 60*time.Second)

	recs := consumeAll(t, c, n, "outbox.order_paid", "outbox.welcome_email")
	checkOnce(t, recs, keys)
	producerIDs := map[int64]bool{}
	for _, r := range recs {
		id := messageID(t, r)
		// A batch of a producer without idempotence carries producer id -1 (and so does each
		// of its records, as kgo decodes them).
		if r.ProducerID < 0 || r.ProducerEpoch < 0 {
			t.Errorf("message %d: producer id %d, epoch %d: not written by an idempotent producer", id, r.ProducerID, r.ProducerEpoch)
		}
		producerIDs[r.ProducerID] = true
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
	if len(producerIDs) != 1 {
		t.Errorf("records carry producer ids %v, want the one id of the relay's client", producerIDs)
	}
}

// The cluster refuses produce requests with an error kgo does not retry: the messages in them
// go back to PENDING with their backoff, the next attempts produce them, and Kafka holds each
// once (a refused produce wrote nothing).
func TestRelayBrokerErrorRetried(t *testing.T) {
	t.Parallel()
	db := relaytest.NewDB(t)
	c := cluster(t, 1, "outbox.order_paid")
	const n, refusals = 40, 5
	keys := map[outbox.MessageID]string{}
	for i := range n {
		key := fmt.Sprintf("order_paid:%d", i)
		keys[db.Enqueue(t, "order_paid", `{}`, key)] = key
	}
	failed := failProduce(c, refusals, kerr.TopicAuthorizationFailed)

	relay := outbox.NewRouter()
	if err := outboxkafka.Register(relay, producer(t, c), outboxkafka.Types(relaytest.Fast, "order_paid")); err != nil {
		t.Fatal(err)
	}
	relaytest.StartWorker(t, db.DB, relay, outbox.Config{Concurrency: 4})
	db.WaitDrained(t, 60*time.Second)

	if failed.Load() != refusals {
		t.Fatalf("%d produce requests refused, want %d", failed.Load(), refusals)
	}
	retries := 0
	for id := range keys {
		r := db.Inspect(t, id)
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

// Messages with ordering keys, enqueued by concurrent producers and relayed by a worker with 8
// slots into a topic of 8 partitions, some failing their first attempt before they were
// produced and some after (a redelivery: a second record): every key's records are in one
// partition, keyed by the ordering key, in commit order, a repeat only right after its
// original.
func TestRelayOrderPerKey(t *testing.T) {
	t.Parallel()
	db := relaytest.NewDB(t)
	c := cluster(t, 8, "outbox.ledger_entry")

	const producers, keysPer, perKey = 3, 2, 15
	db.EnqueueOrderedRace(t, producers, keysPer, perKey, "accounts:", func(int) string { return "ledger_entry" })

	var flaky relaytest.Flaky
	relay := outbox.NewRouter()
	relay.Handle("ledger_entry", relaytest.Fast, flaky.Wrap(outboxkafka.New(producer(t, c)).Handle))
	relaytest.StartWorker(t, db.DB, relay, outbox.Config{Concurrency: 8})
	db.WaitDrained(t, 60*time.Second)

	total := producers * keysPer * perKey
	recs := consumeAll(t, c, total+int(flaky.LostAfter.Load()), "outbox.ledger_entry")
	if len(recs) != total+int(flaky.LostAfter.Load()) || flaky.FailedBefore.Load() == 0 {
		t.Errorf("%d records for %d messages, %d of them produced twice (and %d failures before producing): want %d",
			len(recs), total, flaky.LostAfter.Load(), flaky.FailedBefore.Load(), total+int(flaky.LostAfter.Load()))
	}
	// Per partition, in offset order (the consumer returns each partition's records in order).
	type state struct {
		partition int32
		seq       int
	}
	last := map[string]*state{}
	for _, r := range recs {
		var v struct {
			Key string
			Seq int
		}
		if err := json.Unmarshal(r.Value, &v); err != nil {
			t.Fatal(err)
		}
		if string(r.Key) != v.Key || header(r, "outbox-ordering-key") != v.Key {
			t.Errorf("record %d@%d: key %q, outbox-ordering-key %q, want the ordering key %q", r.Partition, r.Offset, r.Key, header(r, "outbox-ordering-key"), v.Key)
		}
		s, ok := last[v.Key]
		switch {
		case !ok:
			if v.Seq != 0 {
				t.Errorf("%s starts with seq %d, want 0", v.Key, v.Seq)
			}
			last[v.Key] = &state{r.Partition, v.Seq}
			continue
		case s.partition != r.Partition:
			t.Errorf("%s in partitions %d and %d, want one", v.Key, s.partition, r.Partition)
		case v.Seq == s.seq && v.Seq%4 == 1:
			// The repeat of a record whose result was lost, right after it: allowed.
		case v.Seq != s.seq+1:
			t.Errorf("%s: seq %d after seq %d at %d@%d, want %d (commit order per key)", v.Key, v.Seq, s.seq, r.Partition, r.Offset, s.seq+1)
		}
		s.seq = v.Seq
	}
	for k, s := range last {
		if s.seq != perKey-1 {
			t.Errorf("%s ends at seq %d, want %d", k, s.seq, perKey-1)
		}
	}
	if len(last) != producers*keysPer {
		t.Errorf("%d keys in Kafka, want %d", len(last), producers*keysPer)
	}
}

// The idempotency keys that NATS's header rules would make equal (a CR or LF turned into a
// space, outer spaces trimmed), keys outside printable ASCII, and ordering keys that differ the
// same ways: Kafka carries keys and header values as bytes, so every message is a record of its
// own whose record key and headers are the message's, byte for byte.
func TestRelayDistinctKeysStayDistinct(t *testing.T) {
	t.Parallel()
	db := relaytest.NewDB(t)
	c := cluster(t, 4, "outbox.order_paid")

	keys := map[outbox.MessageID]string{}
	notes := map[outbox.MessageID]string{}
	for i, key := range []string{"order_paid:1", "inv 7", "inv\n7", "inv\r7", "inv\t7", "order-9", "order-9 ", " order-9", "~x", "facture-n°7", ""} {
		var opts []outbox.EnqueueOption
		if !strings.ContainsAny(key, "\r\n") { // the core refuses CR and LF in a header value
			opts = append(opts, outbox.Header("note", key))
		}
		id := db.Enqueue(t, "order_paid", fmt.Sprintf(`{"i": %d}`, i), key, opts...)
		if opts != nil {
			notes[id] = key
		}
		if key == "" {
			key = fmt.Sprintf("msg:%d", id)
		}
		keys[id] = key
	}
	orderingKeys := map[outbox.MessageID]string{}
	for i, ok := range []string{"k", " k", "k ", "k\n", "k\r", "k\t", "k"} {
		id := db.EnqueueOrdered(t, "order_paid", fmt.Sprintf(`{"o": %d}`, i), ok)
		orderingKeys[id] = ok
	}

	relay := outbox.NewRouter()
	if err := outboxkafka.Register(relay, producer(t, c), outboxkafka.Types(relaytest.Fast, "order_paid")); err != nil {
		t.Fatal(err)
	}
	w := relaytest.StartWorker(t, db.DB, relay, outbox.Config{Concurrency: 4})
	db.WaitDrained(t, 60*time.Second)
	w.Stop(t)

	recs := consumeAll(t, c, len(keys)+len(orderingKeys), "outbox.order_paid")
	seen := map[outbox.MessageID]int{}
	recordKeys := map[string]bool{}
	for _, r := range recs {
		id := messageID(t, r)
		seen[id]++
		if r := db.Inspect(t, id); r.Status != outbox.StatusSent {
			t.Errorf("message %d is %s, want SENT", id, r.Status)
		}
		if ok, ordered := orderingKeys[id]; ordered {
			if string(r.Key) != ok || header(r, "outbox-ordering-key") != ok {
				t.Errorf("message %d: record key %q, outbox-ordering-key %q, want the ordering key %q", id, r.Key, header(r, "outbox-ordering-key"), ok)
			}
			continue
		}
		key, ok := keys[id]
		if !ok {
			t.Errorf("record of message %d, which the test did not enqueue", id)
			continue
		}
		recordKeys[string(r.Key)] = true
		if string(r.Key) != key || header(r, "outbox-idempotency-key") != key || header(r, "note") != notes[id] {
			t.Errorf("message %d: record key %q, outbox-idempotency-key %q, note %q, want %q, %q, %q",
				id, r.Key, header(r, "outbox-idempotency-key"), header(r, "note"), key, key, notes[id])
		}
	}
	for id := range keys {
		if seen[id] != 1 {
			t.Errorf("message %d (key %q) is in Kafka %d times, want once", id, keys[id], seen[id])
		}
	}
	for id := range orderingKeys {
		if seen[id] != 1 {
			t.Errorf("message %d (ordering key %q) is in Kafka %d times, want once", id, orderingKeys[id], seen[id])
		}
	}
	if len(recordKeys) != len(keys) {
		t.Errorf("%d distinct record keys for %d distinct idempotency keys", len(recordKeys), len(keys))
	}
}
