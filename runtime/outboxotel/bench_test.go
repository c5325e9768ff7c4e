package outboxotel_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/outboxgen/outboxgen/runtime/outbox"
	"github.com/outboxgen/outboxgen/runtime/outboxotel"
)

// discard is an exporter that drops every span: what a batch processor costs without the
// network.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

func benchProvider(b *testing.B) *sdktrace.TracerProvider {
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discard{}), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp
}

// BenchmarkEnqueueHook is the enqueue side's cost per Enqueue: inject and check the trace
// context. BENCHMARKS.md sets it beside the business transaction of the benchmark's W1.
func BenchmarkEnqueueHook(b *testing.B) {
	tp := benchProvider(b)
	member, _ := baggage.NewMember("tenant", "acme")
	bag, _ := baggage.New(member)
	ctx, span := tp.Tracer("bench").Start(baggage.ContextWithBaggage(context.Background(), bag), "request")
	defer span.End()
	hook := outboxotel.EnqueueHook(outboxotel.WithPropagator(w3c))
	b.ReportAllocs()
	for b.Loop() {
		hook(ctx, "welcome_email", map[string]string{})
	}
}

// BenchmarkMiddlewareAndObserver is the worker side's cost per handler call: extract, a sampled
// span with its attributes, the observer's instruments. ns/op is this goroutine's time only. The
// batch processor's goroutine and the collector add CPU of their own; BENCHMARKS.md has both,
// beside the W2 drain's CPU per message.
func BenchmarkMiddlewareAndObserver(b *testing.B) {
	tp := benchProvider(b)
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	cfg, err := outboxotel.Instrument(outbox.Config{}, outboxotel.WithTracerProvider(tp), outboxotel.WithMeterProvider(mp), outboxotel.WithPropagator(w3c))
	if err != nil {
		b.Fatal(err)
	}
	ctx, span := tp.Tracer("bench").Start(context.Background(), "request")
	headers := propagation.MapCarrier{}
	w3c.Inject(ctx, headers)
	span.End()
	h := cfg.Middleware[0](func(context.Context, json.RawMessage, outbox.Delivery) error { return nil })
	d := outbox.Delivery{MessageID: 1, EventType: "welcome_email", Attempt: 1, MaxAttempts: 10, Headers: headers}
	payload := json.RawMessage(`{"company_id":1,"email":"ops@acme.example"}`)
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		_ = h(context.Background(), payload, d)
		cfg.Observer.Handled(d.EventType, outbox.OutcomeSent, time.Since(start))
	}
}
