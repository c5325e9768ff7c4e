package outboxotel

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.39.0"

	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// Handler durations run from milliseconds (a local insert) to the default 1m timeout; the same
// boundaries as runtime/outboxprom's, so the two can be compared.
var handlerBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

// A claim is one short transaction; past a second something is wrong (lock waits, a bad plan).
var claimBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}

// Observer implements outbox.Observer with OpenTelemetry instruments (the list is in the
// package documentation): what this process's workers did, per process; sum across instances.
// Safe for concurrent use; one Observer may serve several workers of a process.
type Observer struct {
	consumed      metric.Int64Counter
	claimDuration metric.Float64Histogram
	handled       metric.Int64Counter
	duration      metric.Float64Histogram
	reclaimed     metric.Int64Counter
	stuckSeen     metric.Int64Counter
	deliveryLag   metric.Float64Histogram // lag.go
	lagOpts       sync.Map                // event type -> []metric.RecordOption

	claimAdd    []metric.AddOption
	claimRecord []metric.RecordOption
	handoffAdd  []metric.AddOption
	byType      byType[*[len(knownOutcomes)]measureOpts] // the known outcomes' options, by event type
	byOutcome   sync.Map                                 // handledKey -> measureOpts, for an outcome added to the runtime later
}

// knownOutcomes are the outcomes whose attribute sets are built with an event type's first call.
var knownOutcomes = [...]outbox.Outcome{outbox.OutcomeSent, outbox.OutcomeRetried, outbox.OutcomeFailed}

// measureOpts is one attribute set as the variadic options of Add and Record, built once: a
// handler call then allocates nothing for it.
type measureOpts struct {
	add    []metric.AddOption
	record []metric.RecordOption
}

func newMeasureOpts(attrs ...attribute.KeyValue) measureOpts {
	o := metric.WithAttributeSet(attribute.NewSet(attrs...))
	return measureOpts{add: []metric.AddOption{o}, record: []metric.RecordOption{o}}
}

var _ outbox.Observer = (*Observer)(nil)
var _ outbox.HandoffObserver = (*Observer)(nil)
var _ outbox.LagObserver = (*Observer)(nil)

type handledKey struct {
	eventType string
	outcome   outbox.Outcome
}

// NewObserver creates the instruments on the meter provider's meter for ScopeName. Options
// used: WithMeterProvider.
func NewObserver(opts ...Option) (*Observer, error) {
	c := newConfig(opts)
	meter := c.meterProvider.Meter(ScopeName, metric.WithSchemaURL(semconv.SchemaURL))
	var o Observer
	var err, e error
	o.consumed, e = meter.Int64Counter("messaging.client.consumed.messages", metric.WithUnit("{message}"),
		metric.WithDescription("Rows claimed by this process's workers."))
	err = errors.Join(err, e)
	o.claimDuration, e = meter.Float64Histogram("messaging.client.operation.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of one claim transaction, empty claims included."),
		metric.WithExplicitBucketBoundaries(claimBuckets...))
	err = errors.Join(err, e)
	o.handled, e = meter.Int64Counter("outboxgen.handled.messages", metric.WithUnit("{message}"),
		metric.WithDescription("Handler calls by event type and outcome: sent (SENT), retried (back to PENDING with a backoff), failed (FAILED: permanent error, attempts exhausted, undecodable payload)."))
	err = errors.Join(err, e)
	o.duration, e = meter.Float64Histogram("messaging.process.duration", metric.WithUnit("s"),
		metric.WithDescription("Handler call duration by event type and outcome (sent, retried, failed)."),
		metric.WithExplicitBucketBoundaries(handlerBuckets...))
	err = errors.Join(err, e)
	o.reclaimed, e = meter.Int64Counter("outboxgen.reclaimed.messages", metric.WithUnit("{message}"),
		metric.WithDescription("PROCESSING rows whose lease expired, moved back to PENDING (or FAILED when exhausted) by this process's reclaim passes."))
	err = errors.Join(err, e)
	o.stuckSeen, e = meter.Int64Counter("outboxgen.stuck_seen.messages", metric.WithUnit("{message}"),
		metric.WithDescription("Rows seen PROCESSING past 3x their lease, summed over watch passes. Any increase means nobody is reclaiming."))
	err = errors.Join(err, e)
	o.deliveryLag, e = newDeliveryLag(meter)
	err = errors.Join(err, e)
	if err != nil {
		return nil, err
	}
	claim := newMeasureOpts(
		semconv.MessagingSystemKey.String(System),
		semconv.MessagingOperationName("claim"),
		semconv.MessagingOperationTypeReceive,
	)
	o.claimAdd, o.claimRecord = claim.add, claim.record
	o.handoffAdd = newMeasureOpts(
		semconv.MessagingSystemKey.String(System),
		semconv.MessagingOperationName("handoff"),
		semconv.MessagingOperationTypeReceive,
	).add
	o.byType.build = func(eventType string) *[len(knownOutcomes)]measureOpts {
		var byOutcome [len(knownOutcomes)]measureOpts
		for i, outcome := range knownOutcomes {
			byOutcome[i] = handledOpts(eventType, outcome)
		}
		return &byOutcome
	}
	return &o, nil
}

// Claimed implements outbox.Observer.
func (o *Observer) Claimed(n int, d time.Duration) {
	if n > 0 { // a counter takes no negative value
		o.consumed.Add(context.Background(), int64(n), o.claimAdd...)
	}
	o.claimDuration.Record(context.Background(), d.Seconds(), o.claimRecord...)
}

// HandedOff implements outbox.HandoffObserver: messages InTx handed off to a worker of this
// process are consumed too, under messaging.operation.name "handoff" (claims are "claim"), so the
// counter's sum is every message this process's workers took. They have no claim duration.
func (o *Observer) HandedOff(n int) {
	if n > 0 {
		o.consumed.Add(context.Background(), int64(n), o.handoffAdd...)
	}
}

// Handled implements outbox.Observer.
func (o *Observer) Handled(eventType string, outcome outbox.Outcome, d time.Duration) {
	opts := o.opts(eventType, outcome)
	o.handled.Add(context.Background(), 1, opts.add...)
	o.duration.Record(context.Background(), d.Seconds(), opts.record...)
}

// Reclaimed implements outbox.Observer.
func (o *Observer) Reclaimed(n int64) {
	if n > 0 {
		o.reclaimed.Add(context.Background(), n)
	}
}

// Stuck implements outbox.Observer.
func (o *Observer) Stuck(n int64) {
	if n > 0 {
		o.stuckSeen.Add(context.Background(), n)
	}
}

// opts is the attribute set of one (event type, outcome), built once: a handler call then
// costs the instruments no allocation for it.
func (o *Observer) opts(eventType string, outcome outbox.Outcome) measureOpts {
	for i, known := range knownOutcomes {
		if outcome == known {
			return o.byType.get(eventType)[i]
		}
	}
	k := handledKey{eventType, outcome}
	if a, ok := o.byOutcome.Load(k); ok {
		return a.(measureOpts)
	}
	a, _ := o.byOutcome.LoadOrStore(k, handledOpts(eventType, outcome))
	return a.(measureOpts)
}

// handledOpts builds the attribute set of one (event type, outcome).
func handledOpts(eventType string, outcome outbox.Outcome) measureOpts {
	kv := []attribute.KeyValue{
		semconv.MessagingSystemKey.String(System),
		semconv.MessagingOperationName("process"),
		semconv.MessagingDestinationName(eventType),
		// An outcome added to the runtime later still shows up, under its own value.
		OutcomeKey.String(string(outcome)),
	}
	if outcome != outbox.OutcomeSent {
		kv = append(kv, semconv.ErrorTypeOther) // the conventions' mark of a failed operation
	}
	return newMeasureOpts(kv...)
}

// Instrument returns cfg with tracing and metrics wired: Middleware(opts...) first in
// cfg.Middleware (outermost) and NewObserver(opts...) as cfg.Observer, beside the Observer cfg
// already had (outboxprom's, say), which keeps receiving every event.
//
//	cfg, err := outboxotel.Instrument(outbox.Config{Concurrency: 32})
func Instrument(cfg outbox.Config, opts ...Option) (outbox.Config, error) {
	obs, err := NewObserver(opts...)
	if err != nil {
		return cfg, err
	}
	cfg.Middleware = append([]outbox.Middleware{Middleware(opts...)}, cfg.Middleware...)
	if cfg.Observer != nil {
		cfg.Observer = observers{cfg.Observer, obs}
	} else {
		cfg.Observer = obs
	}
	return cfg, nil
}

// observers passes every event to each of its members, in order.
type observers []outbox.Observer

func (os observers) Claimed(n int, d time.Duration) {
	for _, o := range os {
		o.Claimed(n, d)
	}
}

// HandedOff passes the event to each member that implements outbox.HandoffObserver.
func (os observers) HandedOff(n int) {
	for _, o := range os {
		if h, ok := o.(outbox.HandoffObserver); ok {
			h.HandedOff(n)
		}
	}
}

func (os observers) Handled(eventType string, outcome outbox.Outcome, d time.Duration) {
	for _, o := range os {
		o.Handled(eventType, outcome, d)
	}
}

func (os observers) Reclaimed(n int64) {
	for _, o := range os {
		o.Reclaimed(n)
	}
}

func (os observers) Stuck(n int64) {
	for _, o := range os {
		o.Stuck(n)
	}
}
