package outboxotel

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.39.0"

	"github.com/outboxgen/outboxgen/runtime/outbox"
	"github.com/outboxgen/outboxgen/runtime/outboxlabel"
)

// RegisterStats creates the table's gauges (outboxgen.messages, outboxgen.due.messages,
// outboxgen.oldest_pending.age, outboxgen.oldest_due.age, outboxgen.stale.messages,
// outboxgen.stuck.messages, and for ordering keys outboxgen.held_ordering_keys,
// outboxgen.oldest_held.age, outboxgen.held_ordering_key.head_id and
// outboxgen.broken_ordering_keys, outboxgen.failing_event_type, and for retention
// outboxgen.retention.oldest_sent.age; see the package documentation) and a callback that runs
// outbox.Stats (one grouped query) on db at each collection, as runtime/outboxprom's
// StatsCollector does on each scrape. SENT rows are never counted. Every instance sees the same
// numbers: register it in one process, or aggregate with max.
//
// A failed query is not hidden behind stale or zero values: that collection has no points for
// these gauges, and the error goes to the reader (ManualReader.Collect returns it, a
// PeriodicReader hands it to otel.Handle). Unregister the returned Registration to stop.
// Options used: WithMeterProvider, WithStatsTimeout.
func RegisterStats(db outbox.DBTX, opts ...Option) (metric.Registration, error) {
	c := newConfig(opts)
	meter := c.meterProvider.Meter(ScopeName, metric.WithSchemaURL(semconv.SchemaURL))
	var err, e error
	gauge := func(name, unit, desc string) metric.Int64ObservableGauge {
		g, e := meter.Int64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
		err = errors.Join(err, e)
		return g
	}
	messages := gauge("outboxgen.messages", "{message}",
		"Rows by event type and status (PENDING, PROCESSING, FAILED, CANCELLED; never SENT).")
	due := gauge("outboxgen.due.messages", "{message}",
		"PENDING rows whose next_attempt_at has passed: waiting only for a worker.")
	stale := gauge("outboxgen.stale.messages", "{message}",
		"PROCESSING rows past their lease (reclaim_after); a live worker reclaims them.")
	stuck := gauge("outboxgen.stuck.messages", "{message}",
		"PROCESSING rows past 3x their lease: nobody is reclaiming them. Alert on > 0.")
	oldest, e := meter.Float64ObservableGauge("outboxgen.oldest_pending.age", metric.WithUnit("s"),
		metric.WithDescription("Age of the oldest PENDING row by the database clock, 0 when none: the delivery lag, delayed and backed-off rows included."))
	err = errors.Join(err, e)
	oldestDue, e := meter.Float64ObservableGauge("outboxgen.oldest_due.age", metric.WithUnit("s"),
		metric.WithDescription("How long the longest-waiting due PENDING row has been claimable, 0 when none: grows when nobody claims."))
	err = errors.Join(err, e)
	held := gauge("outboxgen.held_ordering_keys", "{key}",
		"Ordering keys whose head (FAILED, or PENDING until a retry or a Delay) holds messages behind it, by the head's event type; their sum is every held key.")
	oldestHeld, e := meter.Float64ObservableGauge("outboxgen.oldest_held.age", metric.WithUnit("s"),
		metric.WithDescription("How long the longest-held ordering key's first waiting message has waited, 0 when none. A FAILED head holds its key until retry or purge."))
	err = errors.Join(err, e)
	heldHead := gauge("outboxgen.held_ordering_key.head_id", "{id}",
		fmt.Sprintf("Id of the message holding each held ordering key, for at most the %d longest-held keys.", outbox.MaxHeldListed))
	broken := gauge("outboxgen.broken_ordering_keys", "{key}",
		"Ordering keys stalled by a row the runtime never leaves (a head entry whose message is missing, SENT or not the entry's, or an ordered PENDING message without its entry); a running worker repairs them. Alert on > 0.")
	failing := gauge("outboxgen.failing_event_type", "1", failingDescription)
	oldestSent, e := meter.Float64ObservableGauge("outboxgen.retention.oldest_sent.age", metric.WithUnit("s"),
		metric.WithDescription("How long ago the oldest SENT row still in the table was sent, 0 when none. Near Config.Retention.Sent (default 24h) while retention runs; far above it, no worker of that row's event type is cleaning."))
	err = errors.Join(err, e)
	if err != nil {
		return nil, err
	}
	statuses := []outbox.Status{outbox.StatusPending, outbox.StatusProcessing, outbox.StatusFailed, outbox.StatusCancelled}
	return meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		ctx, cancel := context.WithTimeout(ctx, c.statsTimeout)
		defer cancel()
		s, err := outbox.Stats(ctx, db)
		if err != nil {
			return err
		}
		// Attribute values must be UTF-8 (an exporter may refuse the whole batch otherwise), and
		// event_type is VARBINARY: a row written by other means than Enqueue may hold any bytes.
		byType := outboxlabel.Keys(s.ByType, addCounts)
		for eventType, tc := range byType {
			for i, n := range []int64{tc.Pending, tc.Processing, tc.Failed, tc.Cancelled} {
				o.ObserveInt64(messages, n, metric.WithAttributes(
					semconv.MessagingDestinationName(eventType),
					StatusKey.String(string(statuses[i]))))
			}
		}
		o.ObserveInt64(due, s.Due)
		o.ObserveFloat64(oldest, s.OldestPending.Seconds())
		o.ObserveFloat64(oldestDue, s.OldestDue.Seconds())
		o.ObserveInt64(stale, s.Stale)
		o.ObserveInt64(stuck, s.Stuck)
		for eventType, tc := range byType {
			o.ObserveInt64(held, tc.Held, metric.WithAttributes(semconv.MessagingDestinationName(eventType)))
		}
		o.ObserveFloat64(oldestHeld, s.OldestHeld.Seconds())
		observeHeldHeads(o, heldHead, s.Held)
		o.ObserveInt64(broken, s.BrokenKeys)
		observeFailing(o, failing, s.Failing)
		o.ObserveFloat64(oldestSent, s.OldestSent.Seconds())
		return nil
	}, messages, due, oldest, oldestDue, stale, stuck, held, oldestHeld, heldHead, broken, failing, oldestSent)
}

// addCounts adds the counts these gauges report, for event types that escape alike.
func addCounts(a, b outbox.TypeCounts) outbox.TypeCounts {
	a.Pending += b.Pending
	a.Processing += b.Processing
	a.Failed += b.Failed
	a.Cancelled += b.Cancelled
	a.Held += b.Held
	return a
}

// observeHeldHeads reports the message holding each listed held key. Keys are application data
// stored as VARBINARY; an attribute value must be UTF-8 (an exporter may refuse the whole batch
// otherwise), so invalid bytes are written as \xNN. Two keys that then read alike (a key that
// is not UTF-8 and one that spells its escape out) give one point, the longer held one's.
func observeHeldHeads(o metric.Observer, g metric.Int64ObservableGauge, heads []outbox.HeldKey) {
	seen := make(map[string]bool, len(heads))
	for _, h := range heads {
		key := outboxlabel.Escape(h.OrderingKey)
		if seen[key] {
			continue
		}
		seen[key] = true
		o.ObserveInt64(g, int64(h.Head), metric.WithAttributes(
			OrderingKeyKey.String(key),
			StatusKey.String(string(h.HeadStatus)),
			semconv.MessagingDestinationName(outboxlabel.Escape(h.HeadEventType))))
	}
}
