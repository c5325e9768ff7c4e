package outboxotel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.39.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// Attribute keys of this package's own (not in the OpenTelemetry conventions).
const (
	AttemptKey     = attribute.Key("outboxgen.attempt")      // Delivery.Attempt
	MaxAttemptsKey = attribute.Key("outboxgen.max_attempts") // Delivery.MaxAttempts, on a call that returned an error
	OutcomeKey     = attribute.Key("outboxgen.outcome")      // sent, retried, failed
	StatusKey      = attribute.Key("outboxgen.status")       // PENDING, PROCESSING, FAILED (outboxgen.messages, held heads)
	OrderingKeyKey = attribute.Key("outboxgen.ordering_key") // a held key (outboxgen.held_ordering_key.head_id)
)

// maxStatusDescription bounds the span status text: the error itself is recorded whole in
// the exception event (the SDK's attribute limits apply there).
const maxStatusDescription = 1024

// Middleware returns the worker middleware that runs each handler call in a CONSUMER span
// "process <event type>", linked to the enqueuing span (or its child, with AsChild), with the
// messaging attributes, the attempt and the outcome; see the package documentation. Put it
// first in outbox.Config.Middleware (Instrument does) so that its span covers the others and
// it sees the error the worker will see. Options used: WithTracerProvider, WithPropagator,
// AsChild.
func Middleware(opts ...Option) outbox.Middleware {
	c := newConfig(opts)
	m := &middleware{
		tracer:     c.tracerProvider.Tracer(ScopeName, trace.WithSchemaURL(semconv.SchemaURL)),
		propagator: c.propagator,
		asChild:    c.asChild,
		starts:     byType[*spanStart]{build: newSpanStart},
	}
	return m.wrap
}

type middleware struct {
	tracer     trace.Tracer
	propagator propagation.TextMapPropagator // nil: the global one
	asChild    bool
	starts     byType[*spanStart] // event type -> its span's name and start options
}

// spanStart is what starting one event type's span takes, built once per event type: the name
// and the attributes a sampler needs (system, operation, destination), in the option lists of
// the three kinds of start. What varies per call (the message id, body size, attempt) is set
// with the outcome when the handler returns, in one SetAttributes (see finish): the SDK then
// grows the span's attribute list once instead of copying the attributes at the start and
// again at the end.
type spanStart struct {
	name        string
	child, root []trace.SpanStartOption // root: a new trace; a link is appended per call
}

func newSpanStart(eventType string) *spanStart {
	attrs := trace.WithAttributes(
		semconv.MessagingSystemKey.String(System),
		semconv.MessagingOperationTypeProcess,
		semconv.MessagingOperationName("process"),
		semconv.MessagingDestinationName(eventType),
	)
	return &spanStart{
		name:  "process " + eventType,
		child: []trace.SpanStartOption{consumerKind, attrs},
		root:  []trace.SpanStartOption{consumerKind, attrs, newRoot},
	}
}

// Span start options that do not vary, built once.
var (
	consumerKind = trace.WithSpanKind(trace.SpanKindConsumer)
	newRoot      = trace.WithNewRoot()
)

func (m *middleware) wrap(next outbox.HandlerFunc) outbox.HandlerFunc {
	return func(ctx context.Context, payload json.RawMessage, d outbox.Delivery) (err error) {
		enqueuing := m.extract(&ctx, d.Headers)
		st := m.starts.get(d.EventType)
		var start []trace.SpanStartOption
		switch {
		case m.asChild && enqueuing.IsValid():
			ctx = trace.ContextWithRemoteSpanContext(ctx, enqueuing)
			start = st.child
		case enqueuing.IsValid():
			start = append(st.root[:len(st.root):len(st.root)], trace.WithLinks(trace.Link{SpanContext: enqueuing}))
		default:
			start = st.root
		}
		ctx, span := m.tracer.Start(ctx, st.name, start...)
		defer func() {
			p := recover()
			// A span the sampler dropped records nothing: skip building what it would ignore.
			if span.IsRecording() {
				switch {
				case p != nil:
					perr := fmt.Errorf("panic: %v", p)
					span.RecordError(perr, trace.WithStackTrace(true))
					finish(span, payload, d, outcome(ctx, perr, d), perr, semconv.ErrorTypeKey.String("panic"))
				case err != nil:
					span.RecordError(err)
					finish(span, payload, d, outcome(ctx, err, d), err, errorType(ctx, err))
				default:
					finish(span, payload, d, outbox.OutcomeSent, nil, attribute.KeyValue{})
				}
			}
			span.End()
			if p != nil {
				panic(p) // the worker recovers it, as without this middleware
			}
		}()
		return next(ctx, payload, d)
	}
}

// finish sets the delivery's own attributes and the outcome in one call, and for an error
// (err != nil) the attempts the message has, error.type and the status. A sent delivery's span
// then has eight attributes. The SDK's de-duplication at End allocates nothing up to eight
// (BENCHMARKS.md has the cost of a ninth). So outboxgen.max_attempts, what a reader of a failed
// call wants beside the attempt, is not on the sent ones.
func finish(span trace.Span, payload json.RawMessage, d outbox.Delivery, out outbox.Outcome, err error, errType attribute.KeyValue) {
	id := semconv.MessagingMessageID(strconv.FormatInt(int64(d.MessageID), 10))
	size := semconv.MessagingMessageBodySize(len(payload))
	attempt := AttemptKey.Int(d.Attempt)
	outcome := OutcomeKey.String(string(out))
	if err == nil {
		span.SetAttributes(id, size, attempt, outcome)
		return
	}
	span.SetAttributes(id, size, attempt, outcome, MaxAttemptsKey.Int(d.MaxAttempts), errType)
	span.SetStatus(codes.Error, truncate(err.Error(), maxStatusDescription))
}

// extract returns the enqueuing span context that the headers carry (invalid when they carry
// none) and puts their baggage, if any, in *ctx. Only the message's context counts: a span the
// worker's own context may carry is not the enqueuing one. A message without headers has
// nothing to extract: the propagator is not called.
func (m *middleware) extract(ctx *context.Context, headers map[string]string) trace.SpanContext {
	if len(headers) == 0 {
		return trace.SpanContext{}
	}
	base := *ctx
	if trace.SpanContextFromContext(base).IsValid() {
		base = trace.ContextWithSpanContext(base, trace.SpanContext{})
	}
	msg := propagatorOf(m.propagator).Extract(base, propagation.MapCarrier(headers))
	if bag := baggage.FromContext(msg); bag.Len() > 0 {
		*ctx = baggage.ContextWithBaggage(*ctx, bag)
	}
	return trace.SpanContextFromContext(msg)
}

// outcome is what the worker will record for err, by the worker's rules: nil is sent; a
// Permanent error, or any error on the last attempt, is failed; any other error is retried,
// and so is one the worker's shutdown caused (it gives the message back without counting the
// attempt).
func outcome(ctx context.Context, err error, d outbox.Delivery) outbox.Outcome {
	switch {
	case err == nil:
		return outbox.OutcomeSent
	case errors.Is(ctx.Err(), context.Canceled):
		return outbox.OutcomeRetried
	case outbox.IsPermanent(err):
		return outbox.OutcomeFailed
	case d.MaxAttempts > 0 && d.Attempt >= d.MaxAttempts:
		return outbox.OutcomeFailed
	}
	return outbox.OutcomeRetried
}

// errorType is error.type: a few classes the worker treats apart, else the first ErrorType()
// an error of the chain declares, else the Go type of the innermost error (the cause, not a
// fmt.Errorf or outbox.RetryAfter wrapper).
func errorType(ctx context.Context, err error) attribute.KeyValue {
	switch {
	case outbox.IsPermanent(err):
		return semconv.ErrorTypeKey.String("permanent")
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded):
		return semconv.ErrorTypeKey.String("timeout")
	case errors.Is(err, context.Canceled) || errors.Is(ctx.Err(), context.Canceled):
		return semconv.ErrorTypeKey.String("canceled")
	}
	cause := err
	for e := err; e != nil; e = errors.Unwrap(e) {
		if t, ok := e.(interface{ ErrorType() string }); ok && t.ErrorType() != "" {
			return semconv.ErrorTypeKey.String(t.ErrorType())
		}
		cause = e
	}
	return semconv.ErrorType(cause)
}
