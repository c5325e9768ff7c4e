package outboxprom

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/outboxgen/outboxgen/runtime/outboxlabel"
)

// Delivery lag runs from milliseconds (a hand-off, an idle worker polling) to hours (an outage
// drained after it ends).
var lagBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600}

func newDeliveryLag() *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "delivery_lag_seconds",
		Help:    "From the enqueue's commit to the handler's start, by event type: claimed_at - created_at on the database clock plus the local time from the claim to the handler. Retries count from the first enqueue.",
		Buckets: lagBuckets,
	}, []string{"event_type"})
}

// DeliveryLag implements outbox.LagObserver.
func (o *Observer) DeliveryLag(eventType string, lag time.Duration) {
	o.deliveryLag.WithLabelValues(outboxlabel.Escape(eventType)).Observe(lag.Seconds())
}
