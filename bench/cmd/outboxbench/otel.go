package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/outboxgen/outboxgen/runtime/outboxotel"
)

// otelWiring is the process's OpenTelemetry setup for the otel workload, what an application
// that traces would run: an SDK tracer provider that samples every span, with the default batch
// span processor feeding an exporter that counts and drops (the network is not what is
// measured), an SDK meter provider with a manual reader (collected only to check counts), the
// W3C propagators (TraceContext and Baggage), all set as OpenTelemetry's globals, and
// outboxotel.InstallEnqueue(). The enqueue hook is process-wide and cannot be removed, so it is
// installed once, before the first round, and every Enqueue of the run passes through it: one
// whose context carries no span (every workload but the traced rows) gets no header from it.
type otelWiring struct {
	tp     *sdktrace.TracerProvider
	mp     *sdkmetric.MeterProvider
	reader *sdkmetric.ManualReader
	exp    *countingExporter
}

func setupOTel() *otelWiring {
	w := &otelWiring{exp: &countingExporter{}, reader: sdkmetric.NewManualReader()}
	w.tp = sdktrace.NewTracerProvider(sdktrace.WithBatcher(w.exp), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	w.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(w.reader))
	otel.SetTracerProvider(w.tp)
	otel.SetMeterProvider(w.mp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	outboxotel.InstallEnqueue()
	return w
}

func (w *otelWiring) shutdown(ctx context.Context) error {
	return errors.Join(w.tp.Shutdown(ctx), w.mp.Shutdown(ctx))
}

// countingExporter drops every span and counts the handler spans (kind CONSUMER) and the rest.
type countingExporter struct {
	consumer, other atomic.Int64
}

func (e *countingExporter) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	for _, s := range spans {
		if s.SpanKind() == trace.SpanKindConsumer {
			e.consumer.Add(1)
		} else {
			e.other.Add(1)
		}
	}
	return nil
}

func (*countingExporter) Shutdown(context.Context) error { return nil }

// otelCounts are the wiring's running totals: handler spans exported, and handler calls
// counted by outboxotel's outboxgen.handled.messages counter.
type otelCounts struct {
	spans, handled int64
}

// counts flushes the span processor and collects the metrics.
func (w *otelWiring) counts(ctx context.Context) (otelCounts, error) {
	if err := w.tp.ForceFlush(ctx); err != nil {
		return otelCounts{}, fmt.Errorf("otel: flush spans: %w", err)
	}
	var rm metricdata.ResourceMetrics
	if err := w.reader.Collect(ctx, &rm); err != nil {
		return otelCounts{}, fmt.Errorf("otel: collect metrics: %w", err)
	}
	c := otelCounts{spans: w.exp.consumer.Load()}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "outboxgen.handled.messages" {
				for _, dp := range sum.DataPoints {
					c.handled += dp.Value
				}
			}
		}
	}
	return c, nil
}

// tracedRows counts the messages stored with a W3C traceparent header.
func tracedRows(ctx context.Context, db *sql.DB) (int64, error) {
	var n int64
	err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM outbox_messages WHERE headers LIKE '%"traceparent":"00-%'`).Scan(&n)
	return n, err
}

// tracedTxCheck checks a traced W1 run: every committed transaction's message carries the
// request span's trace context. It first flushes the run's spans, so that the next row does not
// pay for exporting them.
func tracedTxCheck(w *otelWiring) *runCheck {
	return &runCheck{after: func(ctx context.Context, db *sql.DB, n int64) (string, error) {
		if err := w.tp.ForceFlush(ctx); err != nil {
			return "", fmt.Errorf("otel: flush spans: %w", err)
		}
		got, err := tracedRows(ctx, db)
		if err != nil {
			return "", err
		}
		if got != n {
			return "", fmt.Errorf("otel: %d of %d messages stored with a traceparent header", got, n)
		}
		return fmt.Sprintf("otel: all %d messages stored with the request span's traceparent", n), nil
	}}
}

// tracedDrainCheck checks a traced W2 drain: every preloaded message carries a trace context,
// outboxotel's counter saw every handler call, and handler spans reached the exporter (the
// batch processor drops spans when its queue is full, as it does in production: the note says
// how many).
func tracedDrainCheck(ctx context.Context, w *otelWiring) (*runCheck, error) {
	before, err := w.counts(ctx)
	if err != nil {
		return nil, err
	}
	return &runCheck{
		// The preload's request spans are exported before the consumers start, not during.
		preloaded: func(ctx context.Context) error { return w.tp.ForceFlush(ctx) },
		after: func(ctx context.Context, db *sql.DB, n int64) (string, error) {
			rows, err := tracedRows(ctx, db)
			if err != nil {
				return "", err
			}
			after, err := w.counts(ctx)
			if err != nil {
				return "", err
			}
			spans, handled := after.spans-before.spans, after.handled-before.handled
			note := fmt.Sprintf("otel: %d messages with a traceparent, %d handler calls counted by outboxgen.handled.messages, %d handler spans exported", rows, handled, spans)
			switch {
			case rows != n:
				return note, fmt.Errorf("otel: %d of %d messages stored with a traceparent header", rows, n)
			case handled < n:
				return note, fmt.Errorf("otel: outboxgen.handled.messages counted %d handler calls for %d messages", handled, n)
			case spans == 0:
				return note, errors.New("otel: no handler span reached the exporter")
			}
			return note, nil
		}}, nil
}
