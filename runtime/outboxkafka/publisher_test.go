package outboxkafka_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outboxgen/outboxgen/runtime/outbox"
	"github.com/outboxgen/outboxgen/runtime/outboxkafka"
	"github.com/outboxgen/outboxgen/runtime/outboxrelay/relaytest"
)

// These tests need no database: they hand the Publisher deliveries as the worker would and
// read what the kfake cluster stored.

func TestRecordMapping(t *testing.T) {
	t.Parallel()
	c := cluster(t, 4, "outbox.welcome_email", "shop.billing.invoice_paid")
	cl := producer(t, c)
	ctx := context.Background()

	payload := json.RawMessage(`{"user_id": 42, "amount":"1234.50", "note":"café"}`)
	p := outboxkafka.New(cl)
	rec, err := p.Publish(ctx, payload, relaytest.Delivery(7, "welcome_email", "welcome_email:2:42", 3, map[string]string{
		"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"tracestate":  "vendor=opaque",
		"Tenant.ID":   "acme",
		"empty":       "",
	}))
	if err != nil {
		t.Fatalf("Publish: %v", err)
	}
	if rec.Offset != 0 {
		t.Errorf("produced at offset %d, want 0 (the first record of its partition)", rec.Offset)
	}
	// A prefix of one's own, a key from a header, no metadata.
	shop := outboxkafka.New(cl, outboxkafka.WithTopicPrefix("shop."), outboxkafka.WithMetadataPrefix(""),
		outboxkafka.WithKey(outboxkafka.KeyFromHeader("invoice")))
	if err := shop.Handle(ctx, json.RawMessage(`[]`), relaytest.Delivery(8, "billing.invoice_paid", "msg:8", 1, map[string]string{"invoice": "inv-9"})); err != nil {
		t.Fatalf("Handle: %v", err)
	}
	if err := shop.Handle(ctx, json.RawMessage(`{}`), relaytest.Delivery(9, "billing.invoice_paid", "msg:9", 1, nil)); err != nil {
		t.Fatalf("Handle: %v", err)
	}
	// With an ordering key and no WithKey, the ordering key is the record key.
	ordered := relaytest.Delivery(10, "billing.invoice_paid", "msg:10", 1, nil)
	ordered.OrderingKey = "invoices:77"
	if err := outboxkafka.New(cl, outboxkafka.WithTopicPrefix("shop."), outboxkafka.WithSource("shard-7")).Handle(ctx, json.RawMessage(`{}`), ordered); err != nil {
		t.Fatalf("Handle: %v", err)
	}

	recs := consumeAll(t, c, 4, "outbox.welcome_email", "shop.billing.invoice_paid")
	if len(recs) != 4 {
		t.Fatalf("consumed %d records, want 4", len(recs))
	}
	byTopic := map[string][]*kgo.Record{}
	for _, r := range recs {
		byTopic[r.Topic] = append(byTopic[r.Topic], r)
	}
	r := byTopic["outbox.welcome_email"][0]
	if string(r.Key) != "welcome_email:2:42" || string(r.Value) != string(payload) {
		t.Errorf("key %q value %q, want the idempotency key and the payload byte for byte", r.Key, r.Value)
	}
	var got []string
	for _, h := range r.Headers {
		got = append(got, h.Key+"="+string(h.Value))
	}
	want := []string{
		"Tenant.ID=acme", "empty=", "traceparent=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "tracestate=vendor=opaque",
		"outbox-message-id=7", "outbox-event-type=welcome_email", "outbox-idempotency-key=welcome_email:2:42",
		"outbox-attempt=3", "outbox-enqueued-at=2025-03-04T05:06:07.891011Z",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("headers\n got %q\nwant %q", got, want)
	}

	shopRecs := byTopic["shop.billing.invoice_paid"]
	if len(shopRecs) != 3 {
		t.Fatalf("shop.billing.invoice_paid holds %d records, want 3", len(shopRecs))
	}
	keys := map[string]bool{}
	for _, r := range shopRecs {
		keys[string(r.Key)] = true
		if string(r.Key) == "invoices:77" {
			if got := header(r, "outbox-ordering-key"); got != "invoices:77" {
				t.Errorf("outbox-ordering-key %q, want invoices:77", got)
			}
			if got := header(r, "outbox-source"); got != "shard-7" {
				t.Errorf("outbox-source %q, want shard-7", got)
			}
			continue
		}
		for _, h := range r.Headers {
			if strings.HasPrefix(h.Key, "outbox-") {
				t.Errorf("metadata header %s with WithMetadataPrefix(\"\")", h.Key)
			}
		}
	}
	if !keys["inv-9"] || !keys["msg:9"] || !keys["invoices:77"] {
		t.Errorf("keys %v, want inv-9 (from the header), msg:9 (no header: the idempotency key) and invoices:77 (the ordering key)", keys)
	}
}

// Header names and values that NATS's header rules would change (a CR or LF, spaces or a tab
// at either end, a name with ':' or a space), values that differ only there, and bytes that
// are not UTF-8: Kafka record headers are bytes, so each arrives as the message carried it,
// with the record key and the metadata (an ordering key with an outer space, say) likewise.
func TestRecordHeadersByteForByte(t *testing.T) {
	t.Parallel()
	c := cluster(t, 1, "outbox.order_paid")
	p := outboxkafka.New(producer(t, c))
	want := []map[string]string{
		{"note": "inv 7", "tenant:id": "acme"},
		{"note": "inv\n7", "tenant:id": " acme", "a b": "x"},
		{"note": "inv\r7", "tenant:id": "acme ", "x": "a\r\nX-Forged: 1"},
		{"note": "inv\t7", "tenant:id": "\tacme", "~x": "~x", "bytes": "\xff\x00"},
	}
	orderingKeys := []string{"k", " k", "k ", "k\n"}
	for i, h := range want {
		d := relaytest.Delivery(outbox.MessageID(i+1), "order_paid", fmt.Sprintf("order_paid:%d", i), 1, h)
		d.OrderingKey = orderingKeys[i]
		if _, err := p.Publish(context.Background(), json.RawMessage(`{}`), d); err != nil {
			t.Fatalf("Publish %d: %v", i, err)
		}
	}
	recs := consumeAll(t, c, len(want), "outbox.order_paid")
	if len(recs) != len(want) {
		t.Fatalf("consumed %d records, want %d", len(recs), len(want))
	}
	for i, r := range recs {
		got := map[string]string{}
		for _, h := range r.Headers {
			if !strings.HasPrefix(h.Key, "outbox-") {
				got[h.Key] = string(h.Value)
			}
		}
		if !maps.Equal(got, want[i]) {
			t.Errorf("record %d: headers\n got %q\nwant %q", i, got, want[i])
		}
		if string(r.Key) != orderingKeys[i] || header(r, "outbox-ordering-key") != orderingKeys[i] {
			t.Errorf("record %d: key %q, outbox-ordering-key %q, want %q", i, r.Key, header(r, "outbox-ordering-key"), orderingKeys[i])
		}
	}
}

// Records of one key go to one partition, in the order they were produced; the keys spread
// over the partitions.
func TestOrderPerKey(t *testing.T) {
	t.Parallel()
	c := cluster(t, 8, "outbox.ledger_entry")
	p := outboxkafka.New(producer(t, c), outboxkafka.WithKey(outboxkafka.KeyFromHeader("account")))
	accounts := []string{"A", "B", "C", "D", "E", "F"}
	const perKey = 20
	id := outbox.MessageID(0)
	for seq := range perKey {
		for _, a := range accounts {
			id++
			payload := json.RawMessage(fmt.Sprintf(`{"account": %q, "seq": %d}`, a, seq))
			if err := p.Handle(context.Background(), payload, relaytest.Delivery(id, "ledger_entry", fmt.Sprintf("msg:%d", id), 1, map[string]string{"account": a})); err != nil {
				t.Fatal(err)
			}
		}
	}
	recs := consumeAll(t, c, perKey*len(accounts), "outbox.ledger_entry")
	partition := map[string]int32{}
	last := map[string]struct {
		seq    int
		offset int64
	}{}
	partitions := map[int32]bool{}
	for _, r := range recs {
		var v struct {
			Account string
			Seq     int
		}
		if err := json.Unmarshal(r.Value, &v); err != nil {
			t.Fatal(err)
		}
		if string(r.Key) != v.Account {
			t.Errorf("record key %q for account %q", r.Key, v.Account)
		}
		if p, ok := partition[v.Account]; ok && p != r.Partition {
			t.Errorf("account %s in partitions %d and %d, want one", v.Account, p, r.Partition)
		}
		partition[v.Account] = r.Partition
		partitions[r.Partition] = true
		if l, ok := last[v.Account]; ok && (v.Seq != l.seq+1 || r.Offset <= l.offset) {
			t.Errorf("account %s: seq %d at offset %d after seq %d at offset %d, want the next seq at a later offset", v.Account, v.Seq, r.Offset, l.seq, l.offset)
		}
		last[v.Account] = struct {
			seq    int
			offset int64
		}{v.Seq, r.Offset}
	}
	if len(recs) != perKey*len(accounts) {
		t.Errorf("consumed %d records, want %d", len(recs), perKey*len(accounts))
	}
	if len(partitions) < 2 {
		t.Errorf("%d accounts all in partition(s) %v: the key did not choose the partition", len(accounts), partitions)
	}
}

// A broker error that kgo does not retry reaches the worker as a plain error (a retry by the
// outbox's backoff), and the next attempt produces the record once.
func TestBrokerErrorIsRetry(t *testing.T) {
	t.Parallel()
	c := cluster(t, 1, "outbox.order_paid")
	p := outboxkafka.New(producer(t, c))
	failed := failProduce(c, 1, kerr.TopicAuthorizationFailed)
	d := relaytest.Delivery(1, "order_paid", "order_paid:1", 1, nil)

	err := p.Handle(context.Background(), json.RawMessage(`{}`), d)
	if err == nil || outbox.IsPermanent(err) || !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("Handle = %v, want a retryable TOPIC_AUTHORIZATION_FAILED", err)
	}
	if failed.Load() != 1 {
		t.Fatalf("%d produce requests refused, want 1", failed.Load())
	}
	d.Attempt = 2
	if err := p.Handle(context.Background(), json.RawMessage(`{}`), d); err != nil {
		t.Fatalf("second attempt: %v", err)
	}
	if recs := consumeAll(t, c, 1, "outbox.order_paid"); len(recs) != 1 || header(recs[0], "outbox-attempt") != "2" {
		t.Errorf("topic holds %d records, want 1, produced by attempt 2", len(recs))
	}
}

// A retriable broker error (a leader moving) is retried inside ProduceSync by the client: the
// handler succeeds at its first attempt, with the record stored once (the idempotent producer).
func TestRetriableBrokerErrorRetriedByClient(t *testing.T) {
	t.Parallel()
	c := cluster(t, 1, "outbox.order_paid")
	p := outboxkafka.New(producer(t, c))
	failed := failProduce(c, 3, kerr.NotLeaderForPartition)
	if err := p.Handle(context.Background(), json.RawMessage(`{}`), relaytest.Delivery(1, "order_paid", "order_paid:1", 1, nil)); err != nil {
		t.Fatalf("Handle: %v", err)
	}
	if failed.Load() != 3 {
		t.Errorf("%d produce requests refused, want 3 (then the client's retry went through)", failed.Load())
	}
	if recs := consumeAll(t, c, 1, "outbox.order_paid"); len(recs) != 1 {
		t.Errorf("topic holds %d records, want 1", len(recs))
	}
}

// Brokers that keep refusing: kgo retries until the handler's context ends, and the worker
// gets a plain error (a retry), not a hang.
func TestProduceTimeoutIsRetry(t *testing.T) {
	t.Parallel()
	c := cluster(t, 1, "outbox.order_paid")
	p := outboxkafka.New(producer(t, c))
	failProduce(c, 1<<40, kerr.NotLeaderForPartition)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := p.Handle(ctx, json.RawMessage(`{}`), relaytest.Delivery(1, "order_paid", "order_paid:1", 1, nil))
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("Handle took %s, want about the 500ms deadline", took)
	}
	if err == nil || outbox.IsPermanent(err) {
		t.Errorf("Handle = %v, want a retryable error", err)
	}
}

func TestPermanentErrors(t *testing.T) {
	t.Parallel()
	c := cluster(t, 1, "outbox.a")
	ctx := context.Background()

	small := outboxkafka.New(producer(t, c, kgo.ProducerBatchMaxBytes(1024)))
	err := small.Handle(ctx, json.RawMessage(`"`+strings.Repeat("x", 2000)+`"`), relaytest.Delivery(1, "a", "k1", 1, nil))
	if !outbox.IsPermanent(err) || !errors.Is(err, kerr.MessageTooLarge) {
		t.Errorf("a record over the batch limit: %v, want Permanent MESSAGE_TOO_LARGE", err)
	}

	p := outboxkafka.New(producer(t, c))
	failProduce(c, 1, kerr.InvalidRecord)
	err = p.Handle(ctx, json.RawMessage(`{}`), relaytest.Delivery(2, "a", "k2", 1, nil))
	if !outbox.IsPermanent(err) || !errors.Is(err, kerr.InvalidRecord) {
		t.Errorf("a broker's INVALID_RECORD: %v, want Permanent", err)
	}
}

func TestRegister(t *testing.T) {
	t.Parallel()
	cl := producer(t, cluster(t, 1, "outbox.x"))
	long := strings.Repeat("x", 243) // "outbox." + 243 = 250 characters
	relaytest.CheckRegister(t, func(r *outbox.Router, events outboxkafka.Events, opts ...outboxkafka.Option) error {
		return outboxkafka.Register(r, cl, events, opts...)
	}, []relaytest.Refusal[outboxkafka.Option]{
		{Name: "space in the type", Events: outboxkafka.Types(relaytest.Fast, "order paid"), Want: `topic "outbox.order paid": byte 12 (' ')`},
		{Name: "colon in the type", Events: outboxkafka.Types(relaytest.Fast, "billing:paid"), Want: `byte 14 (':')`},
		{Name: "too long", Events: outboxkafka.Types(relaytest.Fast, long), Want: "250 characters, at most 249"},
		{Name: "dot", Events: outboxkafka.Types(relaytest.Fast, "x"), Opts: []outboxkafka.Option{outboxkafka.WithTopic(func(string) string { return "." })}, Want: `"." and ".." are not topic names`},
		{Name: "mapping to nothing", Events: outboxkafka.Types(relaytest.Fast, "x"), Opts: []outboxkafka.Option{outboxkafka.WithTopic(func(string) string { return "" })}, Want: "empty topic"},
		{Name: "bad source", Events: outboxkafka.Types(relaytest.Fast, "x"), Opts: []outboxkafka.Option{outboxkafka.WithSource("shard/a")}, Want: `WithSource("shard/a")`},
	}...)
}

// A generated catalog's router, built with nil handlers, is what Register reads: every outbox
// event of the catalog (not its direct events), with the catalog's policies.
func TestRegisterGeneratedCatalog(t *testing.T) {
	t.Parallel()
	cl := producer(t, cluster(t, 1, "outbox.welcome_email"))
	relaytest.CheckRegisterCatalog(t, func(r *outbox.Router, events outboxkafka.Events, opts ...outboxkafka.Option) error {
		return outboxkafka.Register(r, cl, events, opts...)
	})
}
