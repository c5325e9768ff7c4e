package outboxotel

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.39.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// What the hook stores, so that outbox.Enqueue never refuses it. The first two are the core's
// own limits (see outbox.Header); the others keep the trace context to a share of the message's
// 16 KiB of headers and outbox.MaxHeaders, leaving the rest to the caller's outbox.Header.
const (
	maxKeyBytes     = 128
	maxValueBytes   = 4096
	maxTraceBytes   = 8 << 10
	maxTraceHeaders = 8
	// maxTraceStateMember: W3C Trace Context drops tracestate members over 128 bytes first.
	maxTraceStateMember = 128
	// warnEvery spaces the hook's warnings: a bad baggage set on every request would otherwise
	// log on every enqueue.
	warnEvery = time.Minute
)

// InstallEnqueue registers EnqueueHook(opts...) with outbox.AddEnqueueHook: from then on every
// Enqueue of the process (generated EnqueueX functions included) stores the enqueuing
// context's trace context in the message's headers. Call it once, at startup; each call adds
// another hook. remove unregisters it. To trace the enqueues of one context only, give
// EnqueueHook to outbox.WithEnqueueHook instead.
func InstallEnqueue(opts ...Option) (remove func()) {
	return outbox.AddEnqueueHook(EnqueueHook(opts...))
}

// EnqueueHook returns the hook that InstallEnqueue registers, for a caller that registers hooks
// itself (or tests one). It injects the propagator's fields from ctx into the headers, keeping
// only what outbox.Enqueue accepts (see the package documentation), and adds the enqueue event
// or span. It never fails and never blocks. Options used: WithPropagator, WithLogger,
// WithEnqueueSpan, WithTracerProvider (for WithEnqueueSpan).
func EnqueueHook(opts ...Option) outbox.EnqueueHook {
	c := newConfig(opts)
	e := &enqueuer{propagator: c.propagator, warn: &warner{log: c.logger}}
	if c.enqueueSpan {
		e.tracer = c.tracerProvider.Tracer(ScopeName, trace.WithSchemaURL(semconv.SchemaURL))
	}
	return e.hook
}

type enqueuer struct {
	propagator propagation.TextMapPropagator // nil: the global one
	tracer     trace.Tracer                  // nil: an event on the caller's span instead of a span of our own
	warn       *warner
}

func (e *enqueuer) hook(ctx context.Context, eventType string, headers map[string]string) {
	if e.tracer != nil {
		var span trace.Span
		ctx, span = e.tracer.Start(ctx, "create "+eventType,
			trace.WithSpanKind(trace.SpanKindProducer),
			trace.WithAttributes(
				semconv.MessagingSystemKey.String(System),
				semconv.MessagingOperationTypeCreate,
				semconv.MessagingOperationName("create"),
				semconv.MessagingDestinationName(eventType),
			))
		defer span.End()
	} else if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.AddEvent("outboxgen.enqueue", trace.WithAttributes(semconv.MessagingDestinationName(eventType)))
	}
	carrier := propagation.MapCarrier{}
	if !e.inject(ctx, carrier, eventType) {
		return
	}
	e.store(carrier, headers, eventType)
}

// inject runs the propagator; one that panics costs the message its trace headers, not its
// enqueue (the core calls hooks without a recover).
func (e *enqueuer) inject(ctx context.Context, carrier propagation.MapCarrier, eventType string) (ok bool) {
	defer func() {
		if p := recover(); p != nil {
			e.warn.warn("outboxotel trace headers dropped", eventType, "", truncate(fmt.Sprintf("the propagator panicked: %v", p), 200))
			ok = false
		}
	}()
	propagatorOf(e.propagator).Inject(ctx, carrier)
	return true
}

// store copies what the core will accept into headers: the W3C fields first, so that the
// budget goes to traceparent before baggage.
func (e *enqueuer) store(carrier propagation.MapCarrier, headers map[string]string, eventType string) {
	if len(carrier) == 0 {
		return
	}
	keys := make([]string, 0, len(carrier))
	for k := range carrier {
		keys = append(keys, k)
	}
	if len(keys) > 1 {
		sort.Slice(keys, func(i, j int) bool {
			ri, rj := rank(keys[i]), rank(keys[j])
			if ri != rj {
				return ri < rj
			}
			return keys[i] < keys[j]
		})
	}
	budget, stored := maxTraceBytes, 0
	for _, k := range keys {
		v := carrier[k]
		if v == "" {
			continue
		}
		if why := badKey(k); why != "" {
			e.warn.warn("outboxotel trace header dropped", eventType, k, why)
			continue
		}
		if why := badValue(v); why != "" {
			e.warn.warn("outboxotel trace header dropped", eventType, k, why)
			continue
		}
		if stored == maxTraceHeaders {
			e.warn.warn("outboxotel trace header dropped", eventType, k, fmt.Sprintf("more than %d trace headers", maxTraceHeaders))
			continue
		}
		limit := min(maxValueBytes, budget-len(k))
		if len(v) > limit {
			trimmed, dropped := trimList(k, v, limit)
			if trimmed == "" {
				e.warn.warn("outboxotel trace header dropped", eventType, k, fmt.Sprintf("value of %d bytes, over the %d bytes left for it", len(v), max(limit, 0)))
				continue
			}
			e.warn.warn("outboxotel trace header trimmed", eventType, k, fmt.Sprintf("value of %d bytes, over the %d bytes left for it: %d list members dropped", len(v), limit, dropped))
			v = trimmed
		}
		headers[k] = v
		budget -= len(k) + len(v)
		stored++
	}
}

// rank orders the W3C fields first: traceparent, tracestate, baggage, then the rest by name.
func rank(k string) int {
	switch strings.ToLower(k) {
	case "traceparent":
		return 0
	case "tracestate":
		return 1
	case "baggage":
		return 2
	}
	return 3
}

// badKey says why the core would refuse k as a header key, or "".
func badKey(k string) string {
	if len(k) == 0 || len(k) > maxKeyBytes {
		return fmt.Sprintf("key of %d bytes, want 1 to %d", len(k), maxKeyBytes)
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || c != '-' && c != '_' && c != '.' && c != ':') {
			return "key is not letters, digits and - _ . : (starting with a letter or digit)"
		}
	}
	if strings.HasPrefix(strings.ToLower(k), outbox.ReservedHeaderPrefix) {
		return fmt.Sprintf("the %q prefix is reserved", outbox.ReservedHeaderPrefix)
	}
	return ""
}

// badValue says why the core would refuse v as a header value whatever its length, or "".
func badValue(v string) string {
	switch {
	case !utf8.ValidString(v):
		return "value is not valid UTF-8"
	case strings.ContainsAny(v, "\r\n\x00"):
		return "value contains CR, LF or NUL"
	}
	return ""
}

// trimList drops list members of a baggage or tracestate value until it fits in limit bytes,
// as the W3C specifications allow (never a partial member): baggage loses its largest members
// first, tracestate its members over 128 bytes and then any, from the end (the oldest). It returns ""
// when nothing fits or k is not one of the two.
func trimList(k, v string, limit int) (trimmed string, dropped int) {
	if limit <= 0 {
		return "", 0
	}
	members := strings.Split(v, ",")
	keep := make([]bool, len(members))
	size := len(members) - 1 // the commas
	for i, m := range members {
		keep[i] = true
		size += len(m)
	}
	drop := func(i int) {
		keep[i] = false
		size -= len(members[i]) + 1
		dropped++
	}
	switch strings.ToLower(k) {
	case "baggage":
		order := make([]int, len(members))
		for i := range order {
			order[i] = i
		}
		sort.SliceStable(order, func(a, b int) bool { return len(members[order[a]]) > len(members[order[b]]) })
		for _, i := range order {
			if size <= limit {
				break
			}
			drop(i)
		}
	case "tracestate":
		for i := len(members) - 1; i >= 0 && size > limit; i-- {
			if len(strings.TrimSpace(members[i])) > maxTraceStateMember {
				drop(i)
			}
		}
		for i := len(members) - 1; i >= 0 && size > limit; i-- {
			if keep[i] {
				drop(i)
			}
		}
	default:
		return "", 0
	}
	var b strings.Builder
	for i, m := range members {
		if !keep[i] || strings.TrimSpace(m) == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(m)
	}
	if b.Len() == 0 || b.Len() > limit {
		return "", dropped
	}
	return b.String(), dropped
}

// warner logs at most one line per warnEvery, counting the ones it held back.
type warner struct {
	log        *slog.Logger
	mu         sync.Mutex
	last       time.Time
	suppressed int
}

func (w *warner) warn(msg, eventType, header, reason string) {
	w.mu.Lock()
	now := time.Now()
	if !w.last.IsZero() && now.Sub(w.last) < warnEvery {
		w.suppressed++
		w.mu.Unlock()
		return
	}
	n := w.suppressed
	w.last, w.suppressed = now, 0
	w.mu.Unlock()
	attrs := []slog.Attr{slog.String("event_type", eventType)}
	if header != "" {
		attrs = append(attrs, slog.String("header", truncate(header, 64)))
	}
	attrs = append(attrs, slog.String("reason", reason), slog.Int("suppressed", n))
	w.log.LogAttrs(context.Background(), slog.LevelWarn, msg, attrs...)
}

// truncate cuts s to at most n bytes (a log attribute need not be whole).
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
