// Package outboxprom exports outboxgen's worker events and table depth to Prometheus.
//
// It is its own Go module, so applications that use runtime/outbox without Prometheus never
// inherit client_golang. Two collectors, registered like any other:
//
//	obs := outboxprom.NewObserver()
//	reg.MustRegister(obs, outboxprom.NewStatsCollector(db))
//	w, err := outbox.NewWorker(db, router, outbox.Config{Observer: obs})
//
// Observer counts what this process's workers did (counters and histograms, per process;
// sum them across instances). StatsCollector reads the table on every scrape with
// outbox.Stats (gauges, the same for every instance; scrape it from one place or use max()).
//
// Held ordering keys (events.yaml ordering_key) show as outbox_held_ordering_keys (how many),
// outbox_oldest_held_age_seconds (for how long) and, per key, the message holding it:
//
//	outbox_held_ordering_key_head_id{ordering_key="orders:42",head_status="FAILED"} 1234
//
// Look at that message (`outboxgen show`), then retry or purge it (docs/operations.md). Those
// series are bounded by outbox.MaxHeldListed (100, the longest held first) so that an incident
// holding many keys does not explode the series count; keys that are not valid UTF-8 are
// shown with their invalid bytes as \xNN. See StatsCollector.
package outboxprom

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// Namespace prefixes every metric name.
const Namespace = "outbox"

// Observer implements outbox.Observer with Prometheus counters and histograms, and is itself
// a prometheus.Collector: register it, then pass it as outbox.Config.Observer. Safe for
// concurrent use; one Observer may serve several workers of a process.
type Observer struct {
	claimed         prometheus.Counter
	handedOff       prometheus.Counter
	sent            *prometheus.CounterVec
	retried         *prometheus.CounterVec
	failed          *prometheus.CounterVec
	reclaimed       prometheus.Counter
	stuckSeen       prometheus.Counter
	handlerDuration *prometheus.HistogramVec
	claimDuration   prometheus.Histogram
	retained        *prometheus.CounterVec
	deliveryLag     *prometheus.HistogramVec // lag.go
}

var _ outbox.Observer = (*Observer)(nil)
var _ outbox.HandoffObserver = (*Observer)(nil)
var _ outbox.LagObserver = (*Observer)(nil)
var _ prometheus.Collector = (*Observer)(nil)

// Handler durations run from milliseconds (a local insert) to the default 1m timeout.
var handlerBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

// A claim is one short transaction; past a second something is wrong (lock waits, a bad plan).
var claimBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}

// NewObserver returns an Observer with these metrics:
//
//	outbox_claimed_total                   rows claimed, by a claim transaction or handed off by InTx
//	outbox_handed_off_total                rows InTx handed off to a worker of this process (no claim transaction)
//	outbox_sent_total{event_type}          handler calls that ended SENT
//	outbox_retried_total{event_type}       handler calls that failed and were rescheduled
//	outbox_failed_total{event_type}        handler calls that ended FAILED (permanent, exhausted, undecodable)
//	outbox_reclaimed_total                 PROCESSING rows whose lease expired, moved back by a reclaim pass
//	outbox_stuck_seen_total                stuck rows seen, summed over watch passes (any increase: nobody reclaims)
//	outbox_handler_duration_seconds{event_type,outcome}
//	outbox_claim_duration_seconds
//	outbox_retention_deleted_total{table}  rows this process's retention passes deleted (outbox.RetentionObserver)
//	outbox_delivery_lag_seconds{event_type} from the enqueue's commit to the handler's start (outbox.LagObserver)
func NewObserver() *Observer {
	byType := []string{"event_type"}
	return &Observer{
		claimed: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: Namespace, Name: "claimed_total",
			Help: "Rows claimed by this process's workers: by a claim transaction, or handed off by InTx already claimed (outbox_handed_off_total).",
		}),
		handedOff: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: Namespace, Name: "handed_off_total",
			Help: "Rows InTx handed off to this process's workers, born claimed: no claim transaction (outbox_claim_duration_seconds does not count them).",
		}),
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "sent_total",
			Help: "Handler calls that ended with the message SENT.",
		}, byType),
		retried: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "retried_total",
			Help: "Handler calls that failed with attempts left: the message went back to PENDING with a backoff.",
		}, byType),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "failed_total",
			Help: "Handler calls that ended with the message FAILED (permanent error, attempts exhausted, undecodable payload).",
		}, byType),
		reclaimed: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: Namespace, Name: "reclaimed_total",
			Help: "PROCESSING rows whose lease expired, moved back to PENDING (or FAILED when exhausted) by this process's reclaim passes.",
		}),
		stuckSeen: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: Namespace, Name: "stuck_seen_total",
			Help: "Rows seen PROCESSING past 3x their lease, summed over watch passes. Any increase means nobody is reclaiming.",
		}),
		handlerDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "handler_duration_seconds",
			Help:    "Handler call duration by event type and outcome (sent, retried, failed).",
			Buckets: handlerBuckets,
		}, []string{"event_type", "outcome"}),
		claimDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "claim_duration_seconds",
			Help:    "Duration of one claim transaction, empty claims included.",
			Buckets: claimBuckets,
		}),
		retained: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "retention_deleted_total",
			Help: "Rows this process's retention passes deleted, by table (SENT and FAILED messages, ordering counters, job ledger rows, expired Once keys).",
		}, []string{"table"}),
		deliveryLag: newDeliveryLag(),
	}
}

// Claimed implements outbox.Observer.
func (o *Observer) Claimed(n int, d time.Duration) {
	if n > 0 { // Counter.Add panics on a negative value
		o.claimed.Add(float64(n))
	}
	o.claimDuration.Observe(d.Seconds())
}

// HandedOff implements outbox.HandoffObserver: handed-off rows count as claimed too, so that
// outbox_claimed_total is every row this process's workers took, however they took it.
func (o *Observer) HandedOff(n int) {
	if n > 0 {
		o.claimed.Add(float64(n))
		o.handedOff.Add(float64(n))
	}
}

// Handled implements outbox.Observer.
func (o *Observer) Handled(eventType string, outcome outbox.Outcome, d time.Duration) {
	switch outcome {
	case outbox.OutcomeSent:
		o.sent.WithLabelValues(eventType).Inc()
	case outbox.OutcomeRetried:
		o.retried.WithLabelValues(eventType).Inc()
	case outbox.OutcomeFailed:
		o.failed.WithLabelValues(eventType).Inc()
	}
	// An outcome added to the runtime later still shows up here, under its own label.
	o.handlerDuration.WithLabelValues(eventType, string(outcome)).Observe(d.Seconds())
}

// Reclaimed implements outbox.Observer.
func (o *Observer) Reclaimed(n int64) {
	if n > 0 {
		o.reclaimed.Add(float64(n))
	}
}

// Stuck implements outbox.Observer.
func (o *Observer) Stuck(n int64) {
	if n > 0 {
		o.stuckSeen.Add(float64(n))
	}
}

// Retained implements outbox.RetentionObserver.
func (o *Observer) Retained(table string, n int64) {
	if n > 0 {
		o.retained.WithLabelValues(table).Add(float64(n))
	}
}

func (o *Observer) collectors() []prometheus.Collector {
	return []prometheus.Collector{o.claimed, o.handedOff, o.sent, o.retried, o.failed, o.reclaimed, o.stuckSeen,
		o.handlerDuration, o.claimDuration, o.retained, o.deliveryLag}
}

// Describe implements prometheus.Collector.
func (o *Observer) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range o.collectors() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (o *Observer) Collect(ch chan<- prometheus.Metric) {
	for _, c := range o.collectors() {
		c.Collect(ch)
	}
}
