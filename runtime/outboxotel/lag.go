package outboxotel

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.39.0"

	"github.com/outboxgen/outboxgen/runtime/outbox"
	"github.com/outboxgen/outboxgen/runtime/outboxlabel"
)

// Delivery lag runs from milliseconds (a hand-off, an idle worker polling) to hours (an outage
// drained after it ends); the same boundaries as runtime/outboxprom's.
var lagBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600}

func newDeliveryLag(meter metric.Meter) (metric.Float64Histogram, error) {
	return meter.Float64Histogram("outboxgen.delivery_lag", metric.WithUnit("s"),
		metric.WithDescription("From the enqueue's commit to the handler's start, by event type: claimed_at - created_at on the database clock plus the local time from the claim to the handler. Retries count from the first enqueue."),
		metric.WithExplicitBucketBoundaries(lagBuckets...))
}

// DeliveryLag implements outbox.LagObserver. The attribute set of each event type is built
// once.
func (o *Observer) DeliveryLag(eventType string, lag time.Duration) {
	opts, ok := o.lagOpts.Load(eventType)
	if !ok {
		opts, _ = o.lagOpts.LoadOrStore(eventType, []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(
			semconv.MessagingSystemKey.String(System),
			semconv.MessagingDestinationName(outboxlabel.Escape(eventType))))})
	}
	o.deliveryLag.Record(context.Background(), lag.Seconds(), opts.([]metric.RecordOption)...)
}

// DeliveryLag passes the event to each member that implements outbox.LagObserver.
func (os observers) DeliveryLag(eventType string, lag time.Duration) {
	for _, o := range os {
		if l, ok := o.(outbox.LagObserver); ok {
			l.DeliveryLag(eventType, lag)
		}
	}
}
