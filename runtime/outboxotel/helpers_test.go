package outboxotel_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/outboxgen/outboxgen/runtime/outbox"
	"github.com/outboxgen/outboxgen/runtime/outboxotel"
	"github.com/outboxgen/outboxgen/runtime/outboxtest/testdb"
)

// w3c is the propagator every test wires on both sides: what otel.SetTextMapPropagator is
// usually given.
var w3c = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// The enqueue hook is process-wide (outbox.AddEnqueueHook), so the test binary installs one,
// as an application would, and every test's Enqueue goes through it. Its propagator is w3c
// plus hostile, which adds what a context carrying withHostile asks for: the fields a broken
// or malicious propagator might write.
func TestMain(m *testing.M) {
	outboxotel.InstallEnqueue(
		outboxotel.WithPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}, hostile{})),
		outboxotel.WithLogger(quietLogger()),
	)
	os.Exit(m.Run())
}

type hostileKey struct{}

// withHostile makes hostile write fields into the carrier (a nil map: panic instead).
func withHostile(ctx context.Context, fields map[string]string) context.Context {
	return context.WithValue(ctx, hostileKey{}, fields)
}

// hostile is a propagator that writes whatever the context asks it to, after the W3C ones.
type hostile struct{}

func (hostile) Inject(ctx context.Context, c propagation.TextMapCarrier) {
	fields, ok := ctx.Value(hostileKey{}).(map[string]string)
	if !ok {
		return
	}
	if fields == nil {
		panic("hostile propagator: boom")
	}
	for k, v := range fields {
		c.Set(k, v)
	}
}
func (hostile) Extract(ctx context.Context, _ propagation.TextMapCarrier) context.Context { return ctx }
func (hostile) Fields() []string                                                          { return nil }

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// tracing is a real SDK tracer provider recording every ended span.
type tracing struct {
	tp  *sdktrace.TracerProvider
	rec *tracetest.SpanRecorder
}

func newTracing(t *testing.T) tracing {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tracing{tp, rec}
}

// spans returns the ended spans named name, in the order they ended.
func (tr tracing) spans(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range tr.rec.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// spansOf returns the ended "process" spans of message id, in the order they ended.
func (tr tracing) spansOf(id outbox.MessageID) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range tr.rec.Ended() {
		if v, ok := attr(s.Attributes(), "messaging.message.id"); ok && v.AsString() == itoa(id) {
			out = append(out, s)
		}
	}
	return out
}

func itoa(id outbox.MessageID) string { return strconv.FormatInt(int64(id), 10) }

func attr(kvs []attribute.KeyValue, key string) (attribute.Value, bool) {
	for _, kv := range kvs {
		if string(kv.Key) == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// wantAttrs checks that kvs hold each of want (as strings, whatever the value's type).
func wantAttrs(t *testing.T, what string, kvs []attribute.KeyValue, want map[string]string) {
	t.Helper()
	for k, w := range want {
		v, ok := attr(kvs, k)
		if !ok {
			t.Errorf("%s: no attribute %s (want %q)", what, k, w)
			continue
		}
		if got := v.Emit(); got != w {
			t.Errorf("%s: %s = %q, want %q", what, k, got, w)
		}
	}
}

// enqueueTx enqueues one message in its own committed transaction, as a request would.
func enqueueTx(t *testing.T, ctx context.Context, db *sql.DB, eventType string, opts ...outbox.EnqueueOption) outbox.MessageID {
	t.Helper()
	return enqueueMsg(t, ctx, db, outbox.Message{EventType: eventType, Payload: json.RawMessage(`{}`)}, opts...)
}

func enqueueMsg(t *testing.T, ctx context.Context, db *sql.DB, m outbox.Message, opts ...outbox.EnqueueOption) outbox.MessageID {
	t.Helper()
	var id outbox.MessageID
	err := outbox.InTx(ctx, db, func(tx *sql.Tx) error {
		var err error
		id, err = outbox.Enqueue(ctx, tx, m, opts...)
		return err
	})
	if err != nil {
		t.Fatalf("enqueue %s: %v", m.EventType, err)
	}
	return id
}

// runWorker runs w until done() holds, then stops it and waits for Run to return. done is
// checked after each claim the worker reports to its Observer, so a check follows every poll;
// it fails the test if done does not hold within 30s.
func runWorker(t *testing.T, w worker, done func() bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx) }()
	timeout := time.NewTimer(30 * time.Second)
	defer timeout.Stop()
	for !done() {
		select {
		case <-w.polls:
		case <-timeout.C:
			cancel()
			<-errc
			t.Fatal("the worker did not finish within 30s")
		}
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// worker is a Worker and the claims it reports (polls).
type worker struct {
	*outbox.Worker
	polls polls
}

// polls is an Observer that reports each claim (each poll of the worker) and ignores the other
// events; Instrument passes every event to it as well as to its own Observer. The channel
// holds one report and drops the rest until it is read.
type polls chan struct{}

func (p polls) Claimed(int, time.Duration) {
	select {
	case p <- struct{}{}:
	default:
	}
}
func (polls) Handled(string, outbox.Outcome, time.Duration) {}
func (polls) Reclaimed(int64)                               {}
func (polls) Stuck(int64)                                   {}

func statsOf(t *testing.T, db *testdb.DB) outbox.Snapshot {
	t.Helper()
	s, err := outbox.Stats(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// drained: nothing PENDING or PROCESSING, and failed rows FAILED.
func drained(t *testing.T, db *testdb.DB, failed int64) func() bool {
	return func() bool {
		s := statsOf(t, db)
		return s.Pending == 0 && s.Processing == 0 && s.Failed == failed
	}
}

// fast retries at once, so a test sees the second attempt without waiting a second.
var fast = outbox.Policy{Backoff: outbox.Backoff{Initial: time.Millisecond, Max: time.Millisecond}}

// newWorker builds a worker on db wired by outboxotel.Instrument with tr and mp.
func newWorker(t *testing.T, db *sql.DB, r *outbox.Router, tr tracing, mp *sdkmetric.MeterProvider, opts ...outboxotel.Option) worker {
	t.Helper()
	if mp == nil {
		mp = sdkmetric.NewMeterProvider()
	}
	p := make(polls, 1)
	cfg, err := outboxotel.Instrument(outbox.Config{
		PollInterval: 20 * time.Millisecond, ReclaimInterval: 20 * time.Millisecond, Logger: quietLogger(), Observer: p,
	}, append([]outboxotel.Option{outboxotel.WithTracerProvider(tr.tp), outboxotel.WithMeterProvider(mp), outboxotel.WithPropagator(w3c)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	w, err := outbox.NewWorker(db, r, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return worker{w, p}
}

// metrics is a real SDK meter provider read by hand.
type metrics struct {
	mp     *sdkmetric.MeterProvider
	reader *sdkmetric.ManualReader
}

func newMetrics(t *testing.T) metrics {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	return metrics{mp, reader}
}

// collect reads every instrument, by name.
func (m metrics) collect(t *testing.T) (map[string]metricdata.Metrics, error) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	err := m.reader.Collect(context.Background(), &rm)
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		for _, mm := range sm.Metrics {
			out[mm.Name] = mm
		}
	}
	return out, err
}

func (m metrics) mustCollect(t *testing.T) map[string]metricdata.Metrics {
	t.Helper()
	got, err := m.collect(t)
	if err != nil {
		t.Fatalf("collect: %v", err)
	}
	return got
}

// matches says whether set holds every key=value of want.
func matches(set attribute.Set, want map[string]string) bool {
	for k, w := range want {
		v, ok := set.Value(attribute.Key(k))
		if !ok || v.Emit() != w {
			return false
		}
	}
	return true
}

// point returns the value of the counter or gauge point of m whose attributes hold want, and
// how many points matched.
func point(m metricdata.Metrics, want map[string]string) (float64, int) {
	var v float64
	n := 0
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			if matches(p.Attributes, want) {
				v += float64(p.Value)
				n++
			}
		}
	case metricdata.Gauge[int64]:
		for _, p := range d.DataPoints {
			if matches(p.Attributes, want) {
				v += float64(p.Value)
				n++
			}
		}
	case metricdata.Gauge[float64]:
		for _, p := range d.DataPoints {
			if matches(p.Attributes, want) {
				v += p.Value
				n++
			}
		}
	}
	return v, n
}

// histCount returns the number of observations of histogram m in the points whose attributes
// hold want.
func histCount(m metricdata.Metrics, want map[string]string) uint64 {
	d, ok := m.Data.(metricdata.Histogram[float64])
	if !ok {
		return 0
	}
	var n uint64
	for _, p := range d.DataPoints {
		if matches(p.Attributes, want) {
			n += p.Count
		}
	}
	return n
}
