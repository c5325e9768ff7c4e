package outboxotel

import (
	"log/slog"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of this package's tracer and meter.
const ScopeName = "github.com/outboxgen/outboxgen/runtime/outboxotel"

// System is the value of messaging.system on every span and messaging metric.
const System = "outboxgen"

// DefaultStatsTimeout bounds the outbox.Stats query of one collection (RegisterStats).
const DefaultStatsTimeout = 5 * time.Second

// Option configures InstallEnqueue, EnqueueHook, Middleware, NewObserver, Instrument and
// RegisterStats; each uses the options that concern it and ignores the others, so one option
// list can serve them all.
type Option func(*config)

type config struct {
	tracerProvider trace.TracerProvider
	meterProvider  metric.MeterProvider
	propagator     propagation.TextMapPropagator
	logger         *slog.Logger
	asChild        bool
	enqueueSpan    bool
	statsTimeout   time.Duration
}

func newConfig(opts []Option) config {
	c := config{statsTimeout: DefaultStatsTimeout}
	for _, o := range opts {
		o(&c)
	}
	// The global providers are delegates until the application sets its own: a provider set
	// after this call still takes effect (the first one set; a later replacement does not).
	// The propagator stays nil and is looked up at each use (propagatorOf).
	if c.tracerProvider == nil {
		c.tracerProvider = otel.GetTracerProvider()
	}
	if c.meterProvider == nil {
		c.meterProvider = otel.GetMeterProvider()
	}
	if c.logger == nil {
		c.logger = slog.Default()
	}
	return c
}

// WithTracerProvider sets the provider of the handler spans (and of WithEnqueueSpan's).
// Defaults to otel.GetTracerProvider().
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.tracerProvider = tp }
}

// WithMeterProvider sets the provider of the metrics. Defaults to otel.GetMeterProvider().
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) { c.meterProvider = mp }
}

// WithPropagator sets what writes the trace context into headers at enqueue and reads it back
// in the worker; both sides must agree. Defaults to otel.GetTextMapPropagator(), looked up at
// each enqueue and handler call, so the one the application sets (before or after) is used.
func WithPropagator(p propagation.TextMapPropagator) Option {
	return func(c *config) { c.propagator = p }
}

// WithLogger sets where the enqueue hook warns about trace headers it dropped. Defaults to
// slog.Default().
func WithLogger(l *slog.Logger) Option {
	return func(c *config) { c.logger = l }
}

// AsChild makes each handler span a child of the enqueuing span (the same trace) instead of
// the root of a new trace with a link to it. See the package documentation for the trade-off.
func AsChild() Option {
	return func(c *config) { c.asChild = true }
}

// WithEnqueueSpan makes the enqueue hook create a PRODUCER span "create <event type>" for each
// message, child of the enqueuing context's span, and store that span's context in the
// headers, so that each message has a span of its own for its handler spans to link to.
// Without it, the hook adds an event to the enqueuing span and stores that span's context.
func WithEnqueueSpan() Option {
	return func(c *config) { c.enqueueSpan = true }
}

// WithStatsTimeout bounds the outbox.Stats query of each collection (RegisterStats). Defaults
// to DefaultStatsTimeout (5s).
func WithStatsTimeout(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.statsTimeout = d
		}
	}
}

// propagatorOf is p, or the global propagator when p is nil.
func propagatorOf(p propagation.TextMapPropagator) propagation.TextMapPropagator {
	if p == nil {
		return otel.GetTextMapPropagator()
	}
	return p
}
