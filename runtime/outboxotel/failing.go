package outboxotel

import (
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.39.0"

	"github.com/outboxgen/outboxgen/runtime/outboxlabel"
)

const failingDescription = "1 for each event type whose handlers keep failing: 5 or more of its messages wait for a retry and none was sent in the last 30s. It shows before any message is FAILED. Alert on it."

// observeFailing reports each failing type once per escaped attribute value.
func observeFailing(o metric.Observer, g metric.Int64ObservableGauge, types []string) {
	seen := make(map[string]bool, len(types))
	for _, t := range types {
		v := outboxlabel.Escape(t) // attribute values must be UTF-8
		if !seen[v] {
			seen[v] = true
			o.ObserveInt64(g, 1, metric.WithAttributes(semconv.MessagingDestinationName(v)))
		}
	}
}
