package outboxnats_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxgen/outboxgen/runtime/outbox"
	"github.com/outboxgen/outboxgen/runtime/outboxnats"
	"github.com/outboxgen/outboxgen/runtime/outboxrelay/relaytest"
)

// These tests need no database: they hand the Publisher deliveries as the worker would and
// read what the embedded server stored.

func TestPublishMapping(t *testing.T) {
	t.Parallel()
	ns := startNATS(t)
	_, js := ns.connect(t)
	stream := createStream(t, js, "OUTBOX", time.Minute, "outbox.>", "shop.>")
	ctx := context.Background()

	trace := map[string]string{
		"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"tracestate":  "vendor=opaque",
		"Tenant.ID":   "acme",
		"empty":       "",
	}
	payload := json.RawMessage(`{"user_id": 42, "amount":"1234.50", "note":"café"}`)
	p := outboxnats.New(js)
	d := relaytest.Delivery(7, "welcome_email", "welcome_email:2:42", 3, maps.Clone(trace))
	d.OrderingKey = "users:42"
	ack, err := p.Publish(ctx, payload, d)
	if err != nil {
		t.Fatalf("Publish: %v", err)
	}
	if ack.Stream != "OUTBOX" || ack.Duplicate {
		t.Errorf("ack = %+v, want stream OUTBOX, not a duplicate", ack)
	}
	// A dotted event type makes more tokens; a prefix of one's own replaces "outbox.".
	shop := outboxnats.New(js, outboxnats.WithSubjectPrefix("shop."), outboxnats.WithMetadataPrefix(""))
	if err := shop.Handle(ctx, json.RawMessage(`[]`), relaytest.Delivery(8, "billing.invoice_paid", "msg:8", 1, nil)); err != nil {
		t.Fatalf("Handle: %v", err)
	}

	msgs := storedMsgs(t, stream)
	if len(msgs) != 2 {
		t.Fatalf("stream holds %d messages, want 2", len(msgs))
	}
	m := msgs[0]
	if m.Subject != "outbox.welcome_email" {
		t.Errorf("subject %q, want outbox.welcome_email", m.Subject)
	}
	if string(m.Data) != string(payload) {
		t.Errorf("data %q, want the payload byte for byte: %q", m.Data, payload)
	}
	want := map[string]string{
		"Nats-Msg-Id":            "welcome_email:2:42",
		"outbox-message-id":      "7",
		"outbox-event-type":      "welcome_email",
		"outbox-idempotency-key": "welcome_email:2:42",
		"outbox-attempt":         "3",
		"outbox-enqueued-at":     "2025-03-04T05:06:07.891011Z",
		"outbox-ordering-key":    "users:42",
	}
	maps.Copy(want, trace)
	got := map[string]string{}
	for k, v := range m.Header {
		if len(v) != 1 {
			t.Errorf("header %q has %d values, want 1", k, len(v))
		}
		got[k] = v[0]
	}
	if !maps.Equal(got, want) {
		t.Errorf("headers\n got %v\nwant %v", got, want)
	}

	m = msgs[1]
	if m.Subject != "shop.billing.invoice_paid" || string(m.Data) != "[]" {
		t.Errorf("second message: subject %q data %q, want shop.billing.invoice_paid []", m.Subject, m.Data)
	}
	if len(m.Header) != 1 || m.Header.Get("Nats-Msg-Id") != "msg:8" {
		t.Errorf("with WithMetadataPrefix(\"\") the headers are %v, want only Nats-Msg-Id msg:8", m.Header)
	}
}

// Header names and values that nats.go would change on the way (a CR or LF turned into a
// space, spaces or a tab at either end trimmed, a name that is not an HTTP token left out) and
// values that differ only there: every header arrives, once, and decodes to what the message
// carried, the metadata (an ordering key with an outer space, say) included. A name or value
// that needed no encoding arrives as it is.
func TestPublishHeaderEncoding(t *testing.T) {
	t.Parallel()
	ns := startNATS(t)
	_, js := ns.connect(t)
	stream := createStream(t, js, "OUTBOX", time.Minute, "outbox.>")

	headers := []map[string]string{
		{"note": "inv 7", "tenant:id": "acme", "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		{"note": "inv\n7", "tenant:id": " acme", "a b": "x"},
		{"note": "inv\r7", "tenant:id": "acme ", "x": "a\r\nX-Forged: 1"},
		{"note": "inv\t7", "tenant:id": "\tacme", "~x": "~x", "city": "Zürich"},
	}
	p := outboxnats.New(js)
	for i, h := range headers {
		d := relaytest.Delivery(outbox.MessageID(i+1), "order_paid", "order_paid:"+strconv.Itoa(i), 1, maps.Clone(h))
		d.OrderingKey = []string{"k", " k", "k ", "k\n"}[i]
		if _, err := p.Publish(context.Background(), json.RawMessage(`{}`), d); err != nil {
			t.Fatalf("Publish %d: %v", i, err)
		}
	}
	msgs := storedMsgs(t, stream)
	if len(msgs) != len(headers) {
		t.Fatalf("stream holds %d messages, want %d", len(msgs), len(headers))
	}
	for i, m := range msgs {
		want := maps.Clone(headers[i])
		want["outbox-ordering-key"] = []string{"k", " k", "k ", "k\n"}[i]
		got := map[string]string{}
		for name, vs := range m.Header {
			if len(vs) != 1 {
				t.Errorf("message %d: header %q has %d values, want 1", i+1, name, len(vs))
			}
			n, err1 := outboxnats.Decode(name)
			v, err2 := outboxnats.Decode(vs[0])
			if err := errors.Join(err1, err2); err != nil {
				t.Errorf("message %d: header %q: %q: %v", i+1, name, vs[0], err)
			}
			if _, ok := want[n]; ok {
				got[n] = v
			}
		}
		if !maps.Equal(got, want) {
			t.Errorf("message %d: decoded headers\n got %q\nwant %q", i+1, got, want)
		}
	}
	// Plain names and values, the trace context's among them, arrive as they are.
	if got := msgs[0].Header.Get("traceparent"); got != headers[0]["traceparent"] {
		t.Errorf("traceparent %q, want %q unchanged", got, headers[0]["traceparent"])
	}
	if got := msgs[3].Header.Get("city"); got != "Zürich" {
		t.Errorf("city %q, want Zürich unchanged", got)
	}
	if got := msgs[0].Header.Get("~dGVuYW50Omlk"); got != "acme" {
		t.Errorf("header tenant:id is %q under ~dGVuYW50Omlk, want acme", got)
	}
}

// The same delivery published again (a retry after a lost ack, another attempt, another worker)
// is acknowledged as a duplicate and stored once; another key is another message.
func TestPublishDuplicateWindow(t *testing.T) {
	t.Parallel()
	ns := startNATS(t)
	_, js := ns.connect(t)
	stream := createStream(t, js, "OUTBOX", time.Minute, "outbox.>")
	ctx := context.Background()
	p := outboxnats.New(js)

	var dups []bool
	for _, d := range []outbox.Delivery{
		relaytest.Delivery(1, "order_paid", "order_paid:1:9", 1, nil),
		relaytest.Delivery(1, "order_paid", "order_paid:1:9", 2, nil),
		relaytest.Delivery(1, "order_paid", "order_paid:1:9", 7, map[string]string{"x": "changed"}),
		relaytest.Delivery(2, "order_paid", "msg:2", 1, nil),
	} {
		ack, err := p.Publish(ctx, json.RawMessage(`{}`), d)
		if err != nil {
			t.Fatalf("Publish %+v: %v", d, err)
		}
		dups = append(dups, ack.Duplicate)
	}
	if want := []bool{false, true, true, false}; !equalBools(dups, want) {
		t.Errorf("Duplicate per publish = %v, want %v", dups, want)
	}
	msgs := storedMsgs(t, stream)
	if len(msgs) != 2 {
		t.Fatalf("stream holds %d messages, want 2", len(msgs))
	}
	if got := msgs[0].Header.Get("outbox-attempt"); got != "1" {
		t.Errorf("the stored copy is attempt %s, want the first (1)", got)
	}
}

// Two databases (shards) relaying into one stream: their message ids, and so "msg:<id>", repeat.
// Without WithSource the second database's msg:17 is taken for a duplicate of the first's;
// with it, each is stored.
func TestPublishSource(t *testing.T) {
	t.Parallel()
	ns := startNATS(t)
	_, js := ns.connect(t)
	stream := createStream(t, js, "OUTBOX", time.Minute, "outbox.>")
	ctx := context.Background()
	d := relaytest.Delivery(17, "order_paid", "msg:17", 1, nil)

	var dups []bool
	for _, p := range []*outboxnats.Publisher{
		outboxnats.New(js, outboxnats.WithSource("shard-a")),
		outboxnats.New(js, outboxnats.WithSource("shard-b")),
		outboxnats.New(js),
		outboxnats.New(js),
	} {
		ack, err := p.Publish(ctx, json.RawMessage(`{}`), d)
		if err != nil {
			t.Fatalf("Publish: %v", err)
		}
		dups = append(dups, ack.Duplicate)
	}
	if want := []bool{false, false, false, true}; !equalBools(dups, want) {
		t.Errorf("Duplicate per publish = %v, want %v", dups, want)
	}
	msgs := storedMsgs(t, stream)
	var got []string
	for _, m := range msgs {
		got = append(got, m.Header.Get("Nats-Msg-Id")+" "+m.Header.Get("outbox-source"))
	}
	if want := []string{"shard-a/msg:17 shard-a", "shard-b/msg:17 shard-b", "msg:17 "}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("stored (Nats-Msg-Id outbox-source) %q, want %q", got, want)
	}
}

func equalBools(a, b []bool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// What the relay returns for each failure: a retry (a plain error) or outbox.Permanent, and
// that nothing was stored.
func TestPublishErrors(t *testing.T) {
	t.Parallel()
	ns := startNATS(t)
	_, js := ns.connect(t)
	ctx := context.Background()
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: "SMALL", Subjects: []string{"outbox.>"}, Storage: jetstream.MemoryStorage, MaxMsgSize: 1024,
	})
	if err != nil {
		t.Fatal(err)
	}
	big := json.RawMessage(`"` + strings.Repeat("x", 2000) + `"`)

	for _, c := range []struct {
		name      string
		p         *outboxnats.Publisher
		payload   json.RawMessage
		d         outbox.Delivery
		permanent bool
		contains  string
	}{
		{"JetStream control header", outboxnats.New(js), json.RawMessage(`{}`),
			relaytest.Delivery(2, "a", "k2", 1, map[string]string{"nats-rollup": "all"}), true, `header "nats-rollup"`},
		{"JetStream control header, any case", outboxnats.New(js), json.RawMessage(`{}`),
			relaytest.Delivery(1, "a", "k1", 1, map[string]string{"NATS-Expected-Stream": "X"}), true, `header "NATS-Expected-Stream"`},
		{"over the stream's MaxMsgSize", outboxnats.New(js), big,
			relaytest.Delivery(3, "a", "k3", 1, nil), true, "message size exceeds maximum"},
		{"no stream on the subject", outboxnats.New(js, outboxnats.WithSubjectPrefix("nowhere."),
			outboxnats.WithAckTimeout(2*time.Second)), json.RawMessage(`{}`),
			relaytest.Delivery(4, "a", "k4", 1, nil), false, "no response from stream"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.p.Handle(ctx, c.payload, c.d)
			if err == nil {
				t.Fatal("Handle returned nil, want an error")
			}
			if got := outbox.IsPermanent(err); got != c.permanent {
				t.Errorf("IsPermanent = %v, want %v (err: %v)", got, c.permanent, err)
			}
			if !strings.Contains(err.Error(), c.contains) {
				t.Errorf("error %q does not contain %q", err, c.contains)
			}
		})
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 0 {
		t.Errorf("stream holds %d messages after refusals, want 0", info.State.Msgs)
	}
}

// An ack that never comes (a subscriber that takes the request and never answers, as a stuck
// stream would) is a retry after WithAckTimeout, not a hang until the policy timeout.
func TestPublishAckTimeout(t *testing.T) {
	t.Parallel()
	ns := startNATS(t)
	nc, js := ns.connect(t)
	sub, err := nc.SubscribeSync("silent.>")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	p := outboxnats.New(js, outboxnats.WithSubjectPrefix("silent."), outboxnats.WithAckTimeout(300*time.Millisecond))
	start := time.Now()
	err = p.Handle(context.Background(), json.RawMessage(`{}`), relaytest.Delivery(1, "a", "k", 1, nil))
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Handle took %s, want about the 300ms ack timeout", took)
	}
	if err == nil || outbox.IsPermanent(err) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Handle = %v, want a retryable deadline error", err)
	}
	if _, err := sub.NextMsg(time.Second); err != nil {
		t.Errorf("the message never reached the subject: %v", err)
	}
}

func TestRegister(t *testing.T) {
	t.Parallel()
	_, js := startNATS(t).connect(t)
	relaytest.CheckRegister(t, func(r *outbox.Router, events outboxnats.Events, opts ...outboxnats.Option) error {
		return outboxnats.Register(r, js, events, opts...)
	}, []relaytest.Refusal[outboxnats.Option]{
		{Name: "space in the type", Events: outboxnats.Types(relaytest.Fast, "order paid"), Want: `subject "outbox.order paid": whitespace`},
		{Name: "wildcard type", Events: outboxnats.Types(relaytest.Fast, ">"), Want: `token 2 is the wildcard ">"`},
		{Name: "empty token", Events: outboxnats.Types(relaytest.Fast, "x"), Opts: []outboxnats.Option{outboxnats.WithSubjectPrefix("outbox..")}, Want: "token 2 is empty"},
		{Name: "trailing dot", Events: outboxnats.Types(relaytest.Fast, "x."), Want: "token 3 is empty"},
		{Name: "mapping to nothing", Events: outboxnats.Types(relaytest.Fast, "x"), Opts: []outboxnats.Option{outboxnats.WithSubject(func(string) string { return "" })}, Want: "empty subject"},
		{Name: "bad source", Events: outboxnats.Types(relaytest.Fast, "x"), Opts: []outboxnats.Option{outboxnats.WithSource("shard a")}, Want: `WithSource("shard a")`},
	}...)
}

// A generated catalog's router, built with nil handlers, is what Register reads: every outbox
// event of the catalog (not its direct events), with the catalog's policies.
func TestRegisterGeneratedCatalog(t *testing.T) {
	t.Parallel()
	_, js := startNATS(t).connect(t)
	relaytest.CheckRegisterCatalog(t, func(r *outbox.Router, events outboxnats.Events, opts ...outboxnats.Option) error {
		return outboxnats.Register(r, js, events, opts...)
	})
}
