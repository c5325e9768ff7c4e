package outboxotel_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/outboxgen/outboxgen/runtime/outboxotel"
)

// traceparent is the W3C header of a sampled span context.
func traceparent(sc trace.SpanContext) string {
	return fmt.Sprintf("00-%s-%s-01", sc.TraceID(), sc.SpanID())
}

// A traced context: the hook stores the span's traceparent and the baggage, and marks the
// enqueue on the span.
func TestEnqueueHookStoresTraceContext(t *testing.T) {
	t.Parallel()
	tr := newTracing(t)
	member, _ := baggage.NewMember("tenant", "acme")
	bag, _ := baggage.New(member)
	ctx := baggage.ContextWithBaggage(context.Background(), bag)
	ctx, span := tr.tp.Tracer("test").Start(ctx, "POST /signup")
	h := map[string]string{}
	outboxotel.EnqueueHook(outboxotel.WithPropagator(w3c))(ctx, "welcome_email", h)
	span.End()

	want := map[string]string{"traceparent": traceparent(span.SpanContext()), "baggage": "tenant=acme"}
	if fmt.Sprint(h) != fmt.Sprint(want) {
		t.Errorf("headers = %v, want %v", h, want)
	}
	ended := tr.spans("POST /signup")
	if len(ended) != 1 || len(ended[0].Events()) != 1 || ended[0].Events()[0].Name != "outboxgen.enqueue" {
		t.Fatalf("request span events = %+v, want one outboxgen.enqueue", ended)
	}
	wantAttrs(t, "enqueue event", ended[0].Events()[0].Attributes, map[string]string{"messaging.destination.name": "welcome_email"})
	if n := len(tr.rec.Ended()); n != 1 {
		t.Errorf("%d spans ended, want only the request's (no enqueue span by default)", n)
	}
}

// An untraced context adds nothing.
func TestEnqueueHookUntraced(t *testing.T) {
	t.Parallel()
	h := map[string]string{}
	outboxotel.EnqueueHook(outboxotel.WithPropagator(w3c))(context.Background(), "welcome_email", h)
	if len(h) != 0 {
		t.Errorf("headers = %v, want none", h)
	}
}

// WithEnqueueSpan: a PRODUCER span per message, child of the request's, whose context is the
// one stored.
func TestEnqueueHookEnqueueSpan(t *testing.T) {
	t.Parallel()
	tr := newTracing(t)
	ctx, span := tr.tp.Tracer("test").Start(context.Background(), "POST /signup")
	h := map[string]string{}
	outboxotel.EnqueueHook(outboxotel.WithPropagator(w3c), outboxotel.WithEnqueueSpan(), outboxotel.WithTracerProvider(tr.tp))(ctx, "welcome_email", h)
	span.End()

	created := tr.spans("create welcome_email")
	if len(created) != 1 {
		t.Fatalf("create spans = %d, want 1", len(created))
	}
	c := created[0]
	if c.SpanKind() != trace.SpanKindProducer || c.Parent().SpanID() != span.SpanContext().SpanID() || c.SpanContext().TraceID() != span.SpanContext().TraceID() {
		t.Errorf("create span: kind %v parent %v, want PRODUCER child of the request span %v", c.SpanKind(), c.Parent().SpanID(), span.SpanContext().SpanID())
	}
	wantAttrs(t, "create span", c.Attributes(), map[string]string{
		"messaging.system": "outboxgen", "messaging.operation.type": "create",
		"messaging.operation.name": "create", "messaging.destination.name": "welcome_email",
	})
	if got, want := h["traceparent"], traceparent(c.SpanContext()); got != want {
		t.Errorf("traceparent = %q, want the create span's %q", got, want)
	}
	if ev := tr.spans("POST /signup")[0].Events(); len(ev) != 0 {
		t.Errorf("request span events = %v, want none (the create span replaces the event)", ev)
	}
}

// Without WithPropagator the hook uses the global propagator, set before or after it, and
// replaced later.
func TestEnqueueHookGlobalPropagator(t *testing.T) { // not parallel: sets a global
	tr := newTracing(t)
	hook := outboxotel.EnqueueHook()
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() { otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator()) })
	ctx, span := tr.tp.Tracer("test").Start(context.Background(), "request")
	defer span.End()
	h := map[string]string{}
	hook(ctx, "welcome_email", h)
	if h["traceparent"] != traceparent(span.SpanContext()) {
		t.Errorf("headers = %v, want the span's traceparent from the global propagator", h)
	}
	otel.SetTextMapPropagator(propagation.Baggage{})
	h = map[string]string{}
	hook(ctx, "welcome_email", h)
	if len(h) != 0 {
		t.Errorf("headers = %v after the global propagator became Baggage only, want none", h)
	}
}

// syncBuffer is a log destination safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// What a broken or hostile propagator writes, and what the hook keeps: only what
// outbox.Enqueue accepts, so tracing never fails the enqueue; the first problem is logged.
func TestEnqueueHookRefusesHostileFields(t *testing.T) {
	t.Parallel()
	tr := newTracing(t)
	ctx, span := tr.tp.Tracer("test").Start(context.Background(), "request")
	defer span.End()
	tp := traceparent(span.SpanContext())
	big := strings.Repeat("x", 5000)
	tracestate := make([]string, 0, 32)
	for i := range 32 {
		tracestate = append(tracestate, fmt.Sprintf("v%02d=%s", i, strings.Repeat("s", 150)))
	}
	many := map[string]string{}
	for i := range 12 {
		many[fmt.Sprintf("x-vendor-%02d", i)] = "v"
	}

	for _, c := range []struct {
		name   string
		fields map[string]string // written by the hostile propagator after the W3C ones
		want   map[string]string // headers stored
		log    string            // in the warning
	}{
		{"traceparent with CRLF", map[string]string{"traceparent": tp + "\r\nX-Evil: 1"}, map[string]string{}, "CR, LF or NUL"},
		{"newline in a vendor value", map[string]string{"x-vendor": "a\nb"}, map[string]string{"traceparent": tp}, "CR, LF or NUL"},
		{"NUL", map[string]string{"x-vendor": "a\x00b"}, map[string]string{"traceparent": tp}, "CR, LF or NUL"},
		{"not UTF-8", map[string]string{"tracestate": "k=\xff\xfe"}, map[string]string{"traceparent": tp}, "not valid UTF-8"},
		{"key with a space", map[string]string{"x vendor": "v"}, map[string]string{"traceparent": tp}, "key is not letters"},
		{"key with a newline", map[string]string{"x-vendor\nevil": "v"}, map[string]string{"traceparent": tp}, "key is not letters"},
		{"reserved key", map[string]string{"Outbox-Attempt": "99"}, map[string]string{"traceparent": tp}, "reserved"},
		{"huge key", map[string]string{strings.Repeat("k", 300): "v"}, map[string]string{"traceparent": tp}, "key of 300 bytes"},
		{"huge value", map[string]string{"x-vendor": strings.Repeat("v", 100<<10)}, map[string]string{"traceparent": tp}, "value of 102400 bytes"},
		{"huge baggage keeps its small members", map[string]string{"baggage": "big=" + big + ",tenant=acme, user=7"},
			map[string]string{"traceparent": tp, "baggage": "tenant=acme, user=7"}, "1 list members dropped"},
		{"huge baggage of one member", map[string]string{"baggage": "big=" + big}, map[string]string{"traceparent": tp}, "value of 5004 bytes"},
		{"long tracestate drops members from the end", map[string]string{"tracestate": strings.Join(tracestate, ",")},
			map[string]string{"traceparent": tp, "tracestate": strings.Join(tracestate[:26], ",")}, "6 list members dropped"},
		{"trace headers share 8 KiB", map[string]string{"tracestate": "a=" + strings.Repeat("1", 4000), "baggage": "b=" + strings.Repeat("2", 4000), "x-vendor": strings.Repeat("3", 500)},
			map[string]string{"traceparent": tp, "tracestate": "a=" + strings.Repeat("1", 4000), "baggage": "b=" + strings.Repeat("2", 4000)}, "header=x-vendor reason=\"value of 500 bytes, over the 97 bytes left"},
		{"at most 8 trace headers", many, func() map[string]string {
			w := map[string]string{"traceparent": tp}
			for i := range 7 {
				w[fmt.Sprintf("x-vendor-%02d", i)] = "v"
			}
			return w
		}(), "more than 8 trace headers"},
		{"a panicking propagator", nil, map[string]string{}, "the propagator panicked: hostile propagator: boom"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var logs syncBuffer
			hook := outboxotel.EnqueueHook(
				outboxotel.WithPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, hostile{})),
				outboxotel.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
			h := map[string]string{}
			hook(withHostile(ctx, c.fields), "welcome_email", h)
			if fmt.Sprint(h) != fmt.Sprint(c.want) {
				t.Errorf("headers =\n%.300v\nwant\n%.300v", h, c.want)
			}
			if got := logs.String(); !strings.Contains(got, "level=WARN") || !strings.Contains(got, c.log) || !strings.Contains(got, "event_type=welcome_email") {
				t.Errorf("log = %q, want a warning saying %q", got, c.log)
			}
			if n := strings.Count(logs.String(), "\n"); n != 1 {
				t.Errorf("%d log lines, want 1 (later problems wait a minute)", n)
			}
		})
	}
}

// Baggage with hostile text is percent-encoded by the W3C propagator: stored inert.
func TestEnqueueHookBaggageIsEncoded(t *testing.T) {
	t.Parallel()
	m, err := baggage.NewMemberRaw("note", "line1\r\nX-Evil: 1\x7f é")
	if err != nil {
		t.Fatal(err)
	}
	bag, _ := baggage.New(m)
	h := map[string]string{}
	outboxotel.EnqueueHook(outboxotel.WithPropagator(w3c))(baggage.ContextWithBaggage(context.Background(), bag), "welcome_email", h)
	if got := h["baggage"]; got == "" || strings.ContainsAny(got, "\r\n\x00") {
		t.Fatalf("baggage header = %q, want it percent-encoded", got)
	}
	back := baggage.FromContext(w3c.Extract(context.Background(), propagation.MapCarrier(h)))
	if v := back.Member("note").Value(); v != "line1\r\nX-Evil: 1\x7f é" {
		t.Errorf("baggage read back = %q, want the original text", v)
	}
}
