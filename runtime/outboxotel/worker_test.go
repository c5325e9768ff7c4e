package outboxotel_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/outboxgen/outboxgen/runtime/outbox"
	"github.com/outboxgen/outboxgen/runtime/outboxotel"
	"github.com/outboxgen/outboxgen/runtime/outboxtest/testdb"
)

// Integration tests: the process-wide hook (TestMain) on real Enqueue calls, a real worker on
// the real server (OUTBOX_TEST_DSN; skipped without it), and the real OpenTelemetry SDK.

// request starts the span of the HTTP request that enqueues, with a tenant in its baggage.
func request(t *testing.T, tr tracing) (context.Context, trace.Span) {
	t.Helper()
	member, _ := baggage.NewMember("tenant", "acme")
	bag, _ := baggage.New(member)
	return tr.tp.Tracer("test").Start(baggage.ContextWithBaggage(context.Background(), bag), "POST /signup",
		trace.WithSpanKind(trace.SpanKindServer))
}

// checkLinked checks that s is a root span linked to the enqueuing span req.
func checkLinked(t *testing.T, what string, s sdktrace.ReadOnlySpan, req trace.SpanContext) {
	t.Helper()
	if s.Parent().IsValid() || s.SpanContext().TraceID() == req.TraceID() {
		t.Errorf("%s: parent %v, trace %v: want the root of a new trace", what, s.Parent(), s.SpanContext().TraceID())
	}
	if l := s.Links(); len(l) != 1 || l[0].SpanContext.TraceID() != req.TraceID() || l[0].SpanContext.SpanID() != req.SpanID() {
		t.Errorf("%s: links %+v, want one to the enqueuing span %s/%s", what, l, req.TraceID(), req.SpanID())
	}
}

// A traced enqueue: the row carries the request's trace context, and the handler runs in a
// CONSUMER span linked to the request's span, with the messaging attributes and the baggage.
func TestTracedEnqueueLinksHandlerSpan(t *testing.T) {
	t.Parallel()
	db := testdb.Migrated(t)
	tr := newTracing(t)
	ctx, req := request(t, tr)
	id := enqueueTx(t, ctx, db.DB, "welcome_email")
	req.End()

	rec, err := outbox.Inspect(context.Background(), db, id)
	if err != nil {
		t.Fatal(err)
	}
	if want := traceparent(req.SpanContext()); rec.Headers["traceparent"] != want || rec.Headers["baggage"] != "tenant=acme" || len(rec.Headers) != 2 {
		t.Errorf("row headers = %v, want traceparent %s and baggage tenant=acme", rec.Headers, want)
	}

	var mu sync.Mutex
	var inHandler trace.SpanContext
	var tenant string
	r := outbox.NewRouter()
	r.Handle("welcome_email", outbox.Policy{}, func(ctx context.Context, _ json.RawMessage, _ outbox.Delivery) error {
		mu.Lock()
		defer mu.Unlock()
		inHandler, tenant = trace.SpanContextFromContext(ctx), baggage.FromContext(ctx).Member("tenant").Value()
		return nil
	})
	runWorker(t, newWorker(t, db.DB, r, tr, nil), drained(t, db, 0))

	spans := tr.spans("process welcome_email")
	if len(spans) != 1 {
		t.Fatalf("%d process spans, want 1", len(spans))
	}
	s := spans[0]
	if s.SpanKind() != trace.SpanKindConsumer {
		t.Errorf("kind = %v, want CONSUMER", s.SpanKind())
	}
	checkLinked(t, "process span", s, req.SpanContext())
	wantAttrs(t, "process span", s.Attributes(), map[string]string{
		"messaging.system": "outboxgen", "messaging.operation.type": "process", "messaging.operation.name": "process",
		"messaging.destination.name": "welcome_email", "messaging.message.id": itoa(id), "messaging.message.body.size": "2",
		"outboxgen.attempt": "1", "outboxgen.outcome": "sent",
	})
	if v, ok := attr(s.Attributes(), "outboxgen.max_attempts"); ok {
		t.Errorf("outboxgen.max_attempts = %q on a sent message's span, want it only where the handler failed", v.Emit())
	}
	if s.Status().Code != codes.Unset {
		t.Errorf("status = %+v, want Unset", s.Status())
	}
	mu.Lock()
	defer mu.Unlock()
	if !inHandler.Equal(s.SpanContext()) || tenant != "acme" {
		t.Errorf("handler context: span %v baggage tenant %q; want the process span and tenant=acme", inHandler, tenant)
	}
}

// AsChild: the handler's span is in the request's trace, under the request's span.
func TestAsChildSharesTheTrace(t *testing.T) {
	t.Parallel()
	db := testdb.Migrated(t)
	tr := newTracing(t)
	ctx, req := request(t, tr)
	enqueueTx(t, ctx, db.DB, "welcome_email")
	req.End()
	r := outbox.NewRouter()
	r.Handle("welcome_email", outbox.Policy{}, func(context.Context, json.RawMessage, outbox.Delivery) error { return nil })
	runWorker(t, newWorker(t, db.DB, r, tr, nil, outboxotel.AsChild()), drained(t, db, 0))

	spans := tr.spans("process welcome_email")
	if len(spans) != 1 {
		t.Fatalf("%d process spans, want 1", len(spans))
	}
	s := spans[0]
	if s.SpanContext().TraceID() != req.SpanContext().TraceID() || s.Parent().SpanID() != req.SpanContext().SpanID() || len(s.Links()) != 0 {
		t.Errorf("trace %v parent %v links %v: want a child of the request span %v", s.SpanContext().TraceID(), s.Parent().SpanID(), s.Links(), req.SpanContext().SpanID())
	}
}

// Each delivery is its own span: a retry makes a second span, linked to the same request span
// (each the root of its own trace); the outcome and the error are on each.
func TestRetriesAreSeparateSpans(t *testing.T) {
	t.Parallel()
	db := testdb.Migrated(t)
	tr := newTracing(t)
	ctx, req := request(t, tr)
	flaky := enqueueTx(t, ctx, db.DB, "flaky")
	doomed := enqueueTx(t, ctx, db.DB, "doomed")
	exhausted := enqueueMsg(t, ctx, db.DB, outbox.Message{EventType: "exhausted", Payload: json.RawMessage(`{}`), MaxAttempts: 2})
	req.End()

	var flakyCalls atomic.Int32
	r := outbox.NewRouter()
	r.Handle("flaky", fast, func(context.Context, json.RawMessage, outbox.Delivery) error {
		if flakyCalls.Add(1) == 1 {
			return errors.New("smtp: 421 try again later")
		}
		return nil
	})
	r.Handle("doomed", fast, func(context.Context, json.RawMessage, outbox.Delivery) error {
		return outbox.Permanent(errors.New("mailbox does not exist"))
	})
	r.Handle("exhausted", fast, func(context.Context, json.RawMessage, outbox.Delivery) error {
		return errors.New("still down")
	})
	runWorker(t, newWorker(t, db.DB, r, tr, nil), drained(t, db, 2))

	for _, c := range []struct {
		id       outbox.MessageID
		outcomes []string
		max      string
	}{
		{flaky, []string{"retried", "sent"}, "10"},
		{doomed, []string{"failed"}, "10"},
		{exhausted, []string{"retried", "failed"}, "2"},
	} {
		spans := tr.spansOf(c.id)
		if len(spans) != len(c.outcomes) {
			t.Errorf("message %d: %d spans, want %d", c.id, len(spans), len(c.outcomes))
			continue
		}
		for i, s := range spans {
			what := s.Name() + " attempt " + itoa(outbox.MessageID(i+1))
			wantAttrs(t, what, s.Attributes(), map[string]string{
				"outboxgen.attempt": itoa(outbox.MessageID(i + 1)), "outboxgen.outcome": c.outcomes[i],
			})
			if maxAttempts, ok := attr(s.Attributes(), "outboxgen.max_attempts"); (c.outcomes[i] != "sent") != ok || ok && maxAttempts.Emit() != c.max {
				t.Errorf("%s: outboxgen.max_attempts = %q (set: %v), want %s on a failed call and none on a sent one", what, maxAttempts.Emit(), ok, c.max)
			}
			checkLinked(t, what, s, req.SpanContext())
			if wantErr := c.outcomes[i] != "sent"; wantErr != (s.Status().Code == codes.Error) || wantErr != (len(s.Events()) == 1) {
				t.Errorf("%s: status %+v, %d events; want Error and the exception only when not sent", what, s.Status(), len(s.Events()))
			}
		}
		if len(spans) == 2 && spans[0].SpanContext().TraceID() == spans[1].SpanContext().TraceID() {
			t.Errorf("message %d: both attempts in trace %v, want a trace each", c.id, spans[0].SpanContext().TraceID())
		}
	}
	if s := tr.spansOf(doomed); len(s) == 1 {
		wantAttrs(t, "doomed", s[0].Attributes(), map[string]string{"error.type": "permanent"})
		if !strings.Contains(s[0].Status().Description, "mailbox does not exist") {
			t.Errorf("doomed status = %q, want the error", s[0].Status().Description)
		}
	}
}

// Without a trace context, or with one that does not parse, the handler's span is a root
// span without links; the message is delivered all the same.
func TestUntracedEnqueueGetsRootSpan(t *testing.T) {
	t.Parallel()
	db := testdb.Migrated(t)
	tr := newTracing(t)
	plain := enqueueTx(t, context.Background(), db.DB, "welcome_email")
	// A traceparent set by hand that the core accepts but W3C does not.
	forged := enqueueTx(t, context.Background(), db.DB, "welcome_email", outbox.Header("traceparent", "00-zzzz-forged-01"))
	zeros := enqueueTx(t, context.Background(), db.DB, "welcome_email",
		outbox.Header("traceparent", "00-00000000000000000000000000000000-0000000000000000-01"))

	rec, err := outbox.Inspect(context.Background(), db, plain)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Headers != nil {
		t.Errorf("untraced row headers = %v, want none", rec.Headers)
	}
	r := outbox.NewRouter()
	r.Handle("welcome_email", outbox.Policy{}, func(context.Context, json.RawMessage, outbox.Delivery) error { return nil })
	runWorker(t, newWorker(t, db.DB, r, tr, nil), drained(t, db, 0))
	for _, id := range []outbox.MessageID{plain, forged, zeros} {
		spans := tr.spansOf(id)
		if len(spans) != 1 {
			t.Errorf("message %d: %d spans, want 1", id, len(spans))
			continue
		}
		if s := spans[0]; s.Parent().IsValid() || len(s.Links()) != 0 || !s.SpanContext().IsValid() {
			t.Errorf("message %d: parent %v links %v, want a root span", id, s.Parent(), s.Links())
		}
	}
}

// Headers stay with the row: a FAILED message retried by an operator, and a message reclaimed
// from a dead worker, deliver the same trace context, and their spans link to the request.
func TestHeadersSurviveRetryAndReclaim(t *testing.T) {
	t.Parallel()
	db := testdb.Migrated(t)
	tr := newTracing(t)
	ctx, req := request(t, tr)
	retried := enqueueTx(t, ctx, db.DB, "doomed_once", outbox.Header("request-id", "r-1"))
	reclaimed := enqueueTx(t, ctx, db.DB, "reclaimed", outbox.Header("request-id", "r-2"))
	req.End()
	// A worker claimed it 400s ago with a lease that ended 100s ago, and died.
	db.MustExec(t, `UPDATE outbox_messages SET status = 'PROCESSING', attempts = 1,
		claimed_at = TIMESTAMPADD(SECOND, -400, UTC_TIMESTAMP(6)),
		reclaim_after = TIMESTAMPADD(SECOND, -100, UTC_TIMESTAMP(6)), claim_token = 'dead' WHERE id = ?`, reclaimed)

	var mu sync.Mutex
	seen := map[outbox.MessageID][]map[string]string{}
	record := func(d outbox.Delivery) {
		mu.Lock()
		defer mu.Unlock()
		seen[d.MessageID] = append(seen[d.MessageID], d.Headers)
	}
	r := outbox.NewRouter()
	var doomedCalls atomic.Int32
	r.Handle("doomed_once", fast, func(_ context.Context, _ json.RawMessage, d outbox.Delivery) error {
		record(d)
		if doomedCalls.Add(1) == 1 {
			return outbox.Permanent(errors.New("mailbox full"))
		}
		return nil
	})
	r.Handle("reclaimed", fast, func(_ context.Context, _ json.RawMessage, d outbox.Delivery) error {
		record(d)
		return nil
	})
	runWorker(t, newWorker(t, db.DB, r, tr, nil), drained(t, db, 1))
	if n, err := outbox.Retry(context.Background(), db, outbox.Filter{IDs: []outbox.MessageID{retried}}); err != nil || n != 1 {
		t.Fatalf("Retry = %d, %v; want 1 row", n, err)
	}
	runWorker(t, newWorker(t, db.DB, r, tr, nil), drained(t, db, 0))

	want := map[outbox.MessageID]struct {
		requestID string
		attempts  []string
	}{retried: {"r-1", []string{"1", "1"}}, reclaimed: {"r-2", []string{"2"}}} // Retry gives a fresh budget
	mu.Lock()
	defer mu.Unlock()
	for id, w := range want {
		if len(seen[id]) != len(w.attempts) {
			t.Errorf("message %d: %d deliveries, want %d", id, len(seen[id]), len(w.attempts))
		}
		for i, h := range seen[id] {
			if h["traceparent"] != traceparent(req.SpanContext()) || h["baggage"] != "tenant=acme" || h["request-id"] != w.requestID {
				t.Errorf("message %d delivery %d: headers %v, want the request's trace context and request-id %s", id, i+1, h, w.requestID)
			}
		}
		spans := tr.spansOf(id)
		if len(spans) != len(w.attempts) {
			t.Errorf("message %d: %d spans, want %d", id, len(spans), len(w.attempts))
			continue
		}
		for i, s := range spans {
			checkLinked(t, "message "+itoa(id), s, req.SpanContext())
			wantAttrs(t, "message "+itoa(id), s.Attributes(), map[string]string{"outboxgen.attempt": w.attempts[i]})
		}
	}
}

// Whatever the propagator writes, Enqueue succeeds: fields the core would refuse are dropped
// (or trimmed), what is stored is what the core accepts, and the message is delivered.
func TestHostileTraceContextNeverBreaksEnqueue(t *testing.T) {
	t.Parallel()
	db := testdb.Migrated(t)
	tr := newTracing(t)
	ctx, req := request(t, tr)
	note, _ := baggage.NewMemberRaw("note", "line1\r\nX-Evil: 1 é")
	big, _ := baggage.NewMemberRaw("big", strings.Repeat("b", 5000))
	tenant, _ := baggage.NewMember("tenant", "acme")
	bag, err := baggage.New(note, big, tenant)
	if err != nil {
		t.Fatal(err)
	}
	ctx = baggage.ContextWithBaggage(ctx, bag)
	tp := traceparent(req.SpanContext())

	for _, c := range []struct {
		name   string
		fields map[string]string // nil: the propagator panics
		want   map[string]string
	}{
		{"hostile fields beside the W3C ones", map[string]string{
			"x-crlf": "a\r\nX-Evil: 1", "x-nul": "a\x00b", "x-latin1": "caf\xe9", "x-huge": strings.Repeat("h", 1<<20),
			"bad key": "v", "outbox-attempt": "99", "x-ok": "fine",
		}, map[string]string{"traceparent": tp, "baggage": "", "x-ok": "fine"}},
		{"a hostile traceparent replaces the real one", map[string]string{"traceparent": tp + "\nX-Evil: 1"},
			map[string]string{"baggage": ""}},
		{"the propagator panics", nil, map[string]string{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			id := enqueueTx(t, withHostile(ctx, c.fields), db.DB, "welcome_email", outbox.Header("request-id", "r-1"))
			rec, err := outbox.Inspect(context.Background(), db, id)
			if err != nil {
				t.Fatal(err)
			}
			c.want["request-id"] = "r-1"
			if len(rec.Headers) != len(c.want) {
				t.Errorf("row headers %v, want the keys of %v", rec.Headers, c.want)
			}
			for k, v := range c.want {
				got, ok := rec.Headers[k]
				switch {
				case !ok:
					t.Errorf("row has no %s header", k)
				case k == "baggage":
					// Percent-encoded, the big member dropped; order is the SDK's.
					if strings.Contains(got, "bbbb") || !strings.Contains(got, "tenant=acme") || !strings.Contains(got, "note=line1%0D%0AX-Evil") {
						t.Errorf("baggage = %.200q, want note (encoded) and tenant, not big", got)
					}
				case got != v:
					t.Errorf("header %s = %.100q, want %q", k, got, v)
				}
			}
		})
	}

	var mu sync.Mutex
	var notes []string
	r := outbox.NewRouter()
	r.Handle("welcome_email", outbox.Policy{}, func(ctx context.Context, _ json.RawMessage, _ outbox.Delivery) error {
		mu.Lock()
		defer mu.Unlock()
		notes = append(notes, baggage.FromContext(ctx).Member("note").Value())
		return nil
	})
	runWorker(t, newWorker(t, db.DB, r, tr, nil), drained(t, db, 0))
	spans := tr.spans("process welcome_email")
	if len(spans) != 3 {
		t.Fatalf("%d process spans, want 3", len(spans))
	}
	linked := 0
	for _, s := range spans {
		if len(s.Links()) == 1 {
			checkLinked(t, "hostile", s, req.SpanContext())
			linked++
		}
	}
	if linked != 1 {
		t.Errorf("%d spans linked to the request, want 1 (the others lost their traceparent)", linked)
	}
	mu.Lock()
	defer mu.Unlock()
	decoded := 0
	for _, n := range notes {
		if n == "line1\r\nX-Evil: 1 é" {
			decoded++
		}
	}
	if decoded != 2 {
		t.Errorf("handlers' baggage notes = %q, want the original text twice (the panicking propagator stored none)", notes)
	}
}
