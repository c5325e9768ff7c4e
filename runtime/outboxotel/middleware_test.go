package outboxotel_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/outboxgen/outboxgen/runtime/outbox"
	"github.com/outboxgen/outboxgen/runtime/outboxotel"
)

// The middleware on its own (the worker-driven tests are in worker_test.go): the outcome, the
// status and the error of each way a handler call can end.
func TestMiddlewareOutcomes(t *testing.T) {
	t.Parallel()
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		name             string
		ctx              context.Context
		attempt, max     int
		err              error
		outcome, errType string
	}{
		{"nil is sent", context.Background(), 1, 10, nil, "sent", ""},
		{"an error with attempts left is retried", context.Background(), 3, 10, errors.New("smtp: 421"), "retried", "*errors.errorString"},
		{"an error on the last attempt is failed", context.Background(), 10, 10, errors.New("smtp: 421"), "failed", "*errors.errorString"},
		{"Permanent is failed at once", context.Background(), 1, 10, outbox.Permanent(errors.New("no such mailbox")), "failed", "permanent"},
		{"the cause's type, not its wrappers'", context.Background(), 1, 10, outbox.RetryAfter(time.Second, fmt.Errorf("dial: %w", &net.DNSError{Err: "no such host"})), "retried", "*net.DNSError"},
		{"a declared ErrorType", context.Background(), 1, 10, fmt.Errorf("send: %w", typedErr{}), "retried", "smtp_busy"},
		{"a timeout is retried", context.Background(), 1, 10, fmt.Errorf("send: %w", context.DeadlineExceeded), "retried", "timeout"},
		{"the worker's shutdown gives the message back", canceled, 10, 10, context.Canceled, "retried", "canceled"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			tr := newTracing(t)
			h := outboxotel.Middleware(outboxotel.WithTracerProvider(tr.tp), outboxotel.WithPropagator(w3c))(
				func(context.Context, json.RawMessage, outbox.Delivery) error { return c.err })
			err := h(c.ctx, json.RawMessage(`{"a":1}`), outbox.Delivery{MessageID: 42, EventType: "welcome_email", Attempt: c.attempt, MaxAttempts: c.max})
			if err != c.err {
				t.Errorf("middleware returned %v, want the handler's %v unchanged", err, c.err)
			}
			spans := tr.spans("process welcome_email")
			if len(spans) != 1 {
				t.Fatalf("%d spans, want 1", len(spans))
			}
			s := spans[0]
			wantAttrs(t, "span", s.Attributes(), map[string]string{
				"messaging.system": "outboxgen", "messaging.operation.type": "process", "messaging.operation.name": "process",
				"messaging.destination.name": "welcome_email", "messaging.message.id": "42", "messaging.message.body.size": "7",
				"outboxgen.attempt": fmt.Sprint(c.attempt), "outboxgen.outcome": c.outcome,
			})
			if c.err == nil {
				if s.Status().Code != codes.Unset || len(s.Events()) != 0 {
					t.Errorf("status %v, events %v; want Unset and none", s.Status(), s.Events())
				}
				for _, k := range []string{"error.type", "outboxgen.max_attempts"} {
					if v, ok := attr(s.Attributes(), k); ok {
						t.Errorf("%s = %q on a sent message, want it only on a call that returned an error", k, v.Emit())
					}
				}
				// Eight attributes: the SDK de-duplicates up to eight without allocating (see finish).
				if n := len(s.Attributes()); n != 8 {
					t.Errorf("%d attributes on a sent message's span, want 8: %v", n, s.Attributes())
				}
				return
			}
			wantAttrs(t, "span", s.Attributes(), map[string]string{"outboxgen.max_attempts": fmt.Sprint(c.max)})
			if s.Status().Code != codes.Error || s.Status().Description != c.err.Error() {
				t.Errorf("status = %+v, want Error %q", s.Status(), c.err)
			}
			if len(s.Events()) != 1 || s.Events()[0].Name != "exception" {
				t.Errorf("events = %+v, want the recorded error", s.Events())
			}
			wantAttrs(t, "span", s.Attributes(), map[string]string{"error.type": c.errType})
		})
	}
}

type typedErr struct{}

func (typedErr) Error() string     { return "421" }
func (typedErr) ErrorType() string { return "smtp_busy" }

// A panicking handler: the span records it and ends, and the panic goes on to the worker.
func TestMiddlewarePanic(t *testing.T) {
	t.Parallel()
	tr := newTracing(t)
	h := outboxotel.Middleware(outboxotel.WithTracerProvider(tr.tp), outboxotel.WithPropagator(w3c))(
		func(context.Context, json.RawMessage, outbox.Delivery) error { panic("nil map") })
	func() {
		defer func() {
			if p := recover(); p != "nil map" {
				t.Errorf("recovered %v, want the handler's panic", p)
			}
		}()
		_ = h(context.Background(), nil, outbox.Delivery{MessageID: 1, EventType: "welcome_email", Attempt: 1, MaxAttempts: 1})
	}()
	spans := tr.spans("process welcome_email")
	if len(spans) != 1 {
		t.Fatalf("%d spans ended, want 1", len(spans))
	}
	wantAttrs(t, "span", spans[0].Attributes(), map[string]string{"outboxgen.outcome": "failed", "error.type": "panic"})
	if spans[0].Status().Code != codes.Error || len(spans[0].Events()) != 1 {
		t.Errorf("status %+v events %d, want Error and the exception", spans[0].Status(), len(spans[0].Events()))
	}
	if st, _ := attr(spans[0].Events()[0].Attributes, "exception.stacktrace"); st.AsString() == "" {
		t.Error("no stack trace recorded for the panic")
	}
}

// Link by default, child with AsChild, root without a (valid) trace context; the worker's own
// span never becomes the parent; the headers' baggage reaches the handler.
func TestMiddlewareLinkChildRoot(t *testing.T) {
	t.Parallel()
	producerTr := newTracing(t)
	member, _ := baggage.NewMember("tenant", "acme")
	bag, _ := baggage.New(member)
	ctx, producer := producerTr.tp.Tracer("test").Start(baggage.ContextWithBaggage(context.Background(), bag), "POST /signup")
	producer.End()
	headers := propagation.MapCarrier{}
	w3c.Inject(ctx, headers)
	psc := producer.SpanContext()

	// The worker's context carries a span of its own (a process-wide one, say).
	workerCtx, workerSpan := producerTr.tp.Tracer("test").Start(context.Background(), "worker")
	defer workerSpan.End()

	for _, c := range []struct {
		name    string
		headers map[string]string
		opts    []outboxotel.Option
		check   func(t *testing.T, s trace.SpanContext, parent trace.SpanContext, links []trace.Link)
	}{
		{"linked", headers, nil, func(t *testing.T, s, parent trace.SpanContext, links []trace.Link) {
			if parent.IsValid() || s.TraceID() == psc.TraceID() || s.TraceID() == workerSpan.SpanContext().TraceID() {
				t.Errorf("parent %v trace %v: want a new root trace", parent, s.TraceID())
			}
			if len(links) != 1 || links[0].SpanContext.TraceID() != psc.TraceID() || links[0].SpanContext.SpanID() != psc.SpanID() {
				t.Errorf("links = %+v, want one to the enqueuing span %v", links, psc)
			}
		}},
		{"child", headers, []outboxotel.Option{outboxotel.AsChild()}, func(t *testing.T, s, parent trace.SpanContext, links []trace.Link) {
			if s.TraceID() != psc.TraceID() || parent.SpanID() != psc.SpanID() || !parent.IsRemote() || len(links) != 0 {
				t.Errorf("trace %v parent %v links %v: want a child of the enqueuing span %v", s.TraceID(), parent, links, psc)
			}
		}},
		{"no trace context", nil, nil, func(t *testing.T, s, parent trace.SpanContext, links []trace.Link) {
			if parent.IsValid() || len(links) != 0 || s.TraceID() == workerSpan.SpanContext().TraceID() {
				t.Errorf("parent %v links %v: want a root span", parent, links)
			}
		}},
		{"child without a trace context", nil, []outboxotel.Option{outboxotel.AsChild()}, func(t *testing.T, s, parent trace.SpanContext, links []trace.Link) {
			if parent.IsValid() || len(links) != 0 {
				t.Errorf("parent %v links %v: want a root span", parent, links)
			}
		}},
		{"child with headers but no trace context", map[string]string{"x-request-id": "r-1"}, []outboxotel.Option{outboxotel.AsChild()}, func(t *testing.T, s, parent trace.SpanContext, links []trace.Link) {
			if parent.IsValid() || len(links) != 0 || s.TraceID() == workerSpan.SpanContext().TraceID() {
				t.Errorf("parent %v links %v: want a root span, not a child of the worker's", parent, links)
			}
		}},
		{"garbage traceparent", map[string]string{"traceparent": "00-zz-yy-01", "baggage": "tenant=acme"}, nil, func(t *testing.T, s, parent trace.SpanContext, links []trace.Link) {
			if parent.IsValid() || len(links) != 0 {
				t.Errorf("parent %v links %v: want a root span", parent, links)
			}
		}},
		{"all-zero traceparent", map[string]string{"traceparent": "00-00000000000000000000000000000000-0000000000000000-01", "baggage": "tenant=acme"},
			[]outboxotel.Option{outboxotel.AsChild()}, func(t *testing.T, s, parent trace.SpanContext, links []trace.Link) {
				if parent.IsValid() || len(links) != 0 {
					t.Errorf("parent %v links %v: want a root span", parent, links)
				}
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			tr := newTracing(t)
			var inHandler trace.SpanContext
			var tenant string
			h := outboxotel.Middleware(append([]outboxotel.Option{outboxotel.WithTracerProvider(tr.tp), outboxotel.WithPropagator(w3c)}, c.opts...)...)(
				func(ctx context.Context, _ json.RawMessage, _ outbox.Delivery) error {
					inHandler = trace.SpanContextFromContext(ctx)
					tenant = baggage.FromContext(ctx).Member("tenant").Value()
					return nil
				})
			d := outbox.Delivery{MessageID: 7, EventType: "welcome_email", Attempt: 1, MaxAttempts: 10, EnqueuedAt: time.Now(), Headers: c.headers}
			if err := h(workerCtx, json.RawMessage(`{}`), d); err != nil {
				t.Fatal(err)
			}
			spans := tr.spans("process welcome_email")
			if len(spans) != 1 {
				t.Fatalf("%d spans, want 1", len(spans))
			}
			s := spans[0]
			if s.SpanKind() != trace.SpanKindConsumer {
				t.Errorf("kind = %v, want consumer", s.SpanKind())
			}
			if !inHandler.Equal(s.SpanContext()) {
				t.Errorf("handler's span %v, want the process span %v", inHandler, s.SpanContext())
			}
			var links []trace.Link
			for _, l := range s.Links() {
				links = append(links, trace.Link{SpanContext: l.SpanContext})
			}
			c.check(t, s.SpanContext(), s.Parent(), links)
			if want := map[bool]string{true: "acme", false: ""}[c.headers["baggage"] != ""]; tenant != want {
				t.Errorf("handler's baggage tenant = %q, want %q", tenant, want)
			}
		})
	}
}

// A head sampler decides on what the span has at its start: the messaging system, operation and
// destination (the attributes the conventions ask for at creation). The delivery's own
// attributes arrive with the outcome.
func TestMiddlewareSamplerSeesDestination(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	s := &byDestination{keep: "welcome_email"}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithSampler(s))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	h := outboxotel.Middleware(outboxotel.WithTracerProvider(tp), outboxotel.WithPropagator(w3c))(
		func(context.Context, json.RawMessage, outbox.Delivery) error { return nil })
	for i, typ := range []string{"welcome_email", "audit_log", "welcome_email"} {
		d := outbox.Delivery{MessageID: outbox.MessageID(i + 1), EventType: typ, Attempt: 1, MaxAttempts: 10}
		if err := h(context.Background(), json.RawMessage(`{}`), d); err != nil {
			t.Fatal(err)
		}
	}
	ended := rec.Ended()
	if len(ended) != 2 {
		t.Fatalf("%d spans recorded, want the 2 of welcome_email (the sampler saw: %v)", len(ended), s.seen())
	}
	for _, sp := range ended {
		wantAttrs(t, "span", sp.Attributes(), map[string]string{"messaging.destination.name": "welcome_email", "outboxgen.outcome": "sent"})
	}
	for _, attrs := range s.seen() {
		wantAttrs(t, "sampler's view", attrs, map[string]string{
			"messaging.system": "outboxgen", "messaging.operation.name": "process", "messaging.operation.type": "process"})
	}
}

// byDestination samples the spans of one event type and remembers the attributes it was shown.
type byDestination struct {
	keep string
	mu   sync.Mutex
	got  [][]attribute.KeyValue
}

func (s *byDestination) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	s.mu.Lock()
	s.got = append(s.got, p.Attributes)
	s.mu.Unlock()
	for _, kv := range p.Attributes {
		if kv.Key == "messaging.destination.name" && kv.Value.AsString() == s.keep {
			return sdktrace.SamplingResult{Decision: sdktrace.RecordAndSample}
		}
	}
	return sdktrace.SamplingResult{Decision: sdktrace.Drop}
}

func (s *byDestination) seen() [][]attribute.KeyValue {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.got
}

func (*byDestination) Description() string { return "byDestination" }

// A span the sampler drops records nothing, but the middleware still hands the handler's error
// back unchanged and re-raises its panic: skipping the attributes must not skip the outcome.
func TestMiddlewareDroppedSpanPassesOutcomeOn(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithSampler(sdktrace.NeverSample()))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	mw := outboxotel.Middleware(outboxotel.WithTracerProvider(tp), outboxotel.WithPropagator(w3c))
	d := outbox.Delivery{MessageID: 7, EventType: "welcome_email", Attempt: 1, MaxAttempts: 10}

	boom := errors.New("smtp: 421")
	if err := mw(func(context.Context, json.RawMessage, outbox.Delivery) error { return boom })(context.Background(), nil, d); err != boom {
		t.Errorf("dropped span: middleware returned %v, want the handler's %v", err, boom)
	}
	func() {
		defer func() {
			if p := recover(); p != "nil map" {
				t.Errorf("dropped span: recovered %v, want the handler's panic re-raised", p)
			}
		}()
		_ = mw(func(context.Context, json.RawMessage, outbox.Delivery) error { panic("nil map") })(context.Background(), nil, d)
	}()
	if n := len(rec.Ended()); n != 0 {
		t.Errorf("%d spans recorded with NeverSample, want 0", n)
	}
}
