package outboxprom

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/outboxgen/outboxgen/runtime/outbox"
	"github.com/outboxgen/outboxgen/runtime/outboxlabel"
)

// DefaultStatsTimeout bounds the outbox.Stats query of one scrape.
const DefaultStatsTimeout = 5 * time.Second

// StatsCollector is a prometheus.Collector that runs outbox.Stats (one grouped query) on every
// scrape and exports the table's state as gauges. SENT rows are never counted: that part of the
// table grows without bound. Every instance sees the same numbers, so alert on max() or scrape
// one instance.
//
//	outbox_messages{event_type,status}     PENDING, PROCESSING and FAILED rows per type (0s
//	                                       included for a type that has any such row)
//	outbox_due_messages                    PENDING rows whose next_attempt_at has passed (and, when
//	                                       ordered, that are their key's head: claimable now)
//	outbox_oldest_pending_age_seconds      age of the oldest PENDING row (0 when none), delayed
//	                                       and backed-off rows included
//	outbox_oldest_due_age_seconds          how long the longest-waiting due row has been
//	                                       claimable (0 when none): alert when it grows, nobody
//	                                       is claiming
//	outbox_stale_messages                  PROCESSING past their lease; a live worker reclaims them
//	outbox_stuck_messages                  PROCESSING past 3x their lease: nobody is reclaiming (alert on > 0)
//	outbox_held_ordering_keys              ordering keys whose head cannot be handled now (FAILED,
//	                                       or waiting for a retry or a Delay) while others wait
//	outbox_oldest_held_age_seconds         how long the longest-held key's first waiting message
//	                                       has waited (0 when none): alert when it grows
//	outbox_held_ordering_key_head_id{ordering_key,head_status}
//	                                       per held key, the id of the message holding it (its
//	                                       head, FAILED or PENDING): the id to inspect, then
//	                                       retry or purge
//	outbox_broken_ordering_keys            ordering keys stalled by a row the runtime never leaves
//	                                       (a head entry whose message is missing, SENT or not the
//	                                       entry's, or an ordered PENDING message without its
//	                                       entry); a running worker repairs them (alert on > 0)
//	outbox_failing_event_type{event_type}  1 for each type whose handlers keep failing: 5 or more
//	                                       messages wait for a retry and none was sent in 30s
//	                                       (outbox.TypeCounts.Failing), before any is FAILED
//	outbox_retention_oldest_sent_seconds   how long ago the oldest SENT row still kept was sent
//	                                       (0 when none): near Config.Retention.Sent while
//	                                       retention runs; alert when it passes that by far
//
// The head-id series are bounded: one per key of outbox.Snapshot.Held, at most
// outbox.MaxHeldListed (100), the longest held first, while outbox_held_ordering_keys counts
// every held key. Keys are application data, so a bad deploy could hold thousands of them at
// once; a series per key without a bound would grow the scrape and the TSDB with the incident.
// A key that stops being held disappears from the next scrape (nothing is kept between
// scrapes). The value is the message id as a float64: exact up to 2^53. Label values are
// escaped by the client library; an ordering key that is not valid UTF-8 (the column is
// VARBINARY; Enqueue refuses such keys, but a row written by other means may hold one) is
// shown with each invalid byte as \xNN, since Prometheus label values must be UTF-8.
//
// A failed query is not hidden behind stale or zero values: the scrape gets an invalid metric
// carrying the error (prometheus.NewInvalidMetric), so the registry reports it (promhttp
// answers 500 by default and the target's `up` goes to 0).
type StatsCollector struct {
	db      outbox.DBTX
	timeout time.Duration

	messages, due, oldest, oldestDue, stale, stuck, held, oldestHeld, heldHead, broken, paused *prometheus.Desc

	failing *prometheus.Desc // failing.go
	// oldestSent is retention's: Snapshot.OldestSent.
	oldestSent *prometheus.Desc
}

var _ prometheus.Collector = (*StatsCollector)(nil)

// StatsOption configures a StatsCollector.
type StatsOption func(*StatsCollector)

// WithTimeout bounds each scrape's outbox.Stats query. Defaults to DefaultStatsTimeout (5s).
func WithTimeout(d time.Duration) StatsOption {
	return func(c *StatsCollector) {
		if d > 0 {
			c.timeout = d
		}
	}
}

// NewStatsCollector returns a collector that reads db (usually the application's *sql.DB) on
// every scrape.
func NewStatsCollector(db outbox.DBTX, opts ...StatsOption) *StatsCollector {
	c := &StatsCollector{
		db:      db,
		timeout: DefaultStatsTimeout,
		messages: prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", "messages"),
			"Rows by event type and status (PENDING, PROCESSING, FAILED, CANCELLED; never SENT).",
			[]string{"event_type", "status"}, nil),
		paused: prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", "paused_event_type"),
			"1 for each event type paused with outboxgen pause or outbox.Pause: no worker claims it. Alert when one stays paused longer than planned.",
			[]string{"event_type"}, nil),
		failing: failingDesc(),
		due: prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", "due_messages"),
			"PENDING rows whose next_attempt_at has passed: waiting only for a worker.", nil, nil),
		oldest: prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", "oldest_pending_age_seconds"),
			"Age of the oldest PENDING row by the database clock, 0 when none: the delivery lag, delayed and backed-off rows included.", nil, nil),
		oldestDue: prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", "oldest_due_age_seconds"),
			"How long the longest-waiting due PENDING row has been claimable, 0 when none: grows when nobody claims.", nil, nil),
		stale: prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", "stale_messages"),
			"PROCESSING rows past their lease (reclaim_after); a live worker reclaims them.", nil, nil),
		stuck: prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", "stuck_messages"),
			"PROCESSING rows past 3x their lease: nobody is reclaiming them. Alert on > 0.", nil, nil),
		held: prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", "held_ordering_keys"),
			"Ordering keys whose head message cannot be handled now (FAILED, or waiting for a retry or a Delay) while others of the key wait behind it.", nil, nil),
		oldestHeld: prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", "oldest_held_age_seconds"),
			"How long the longest-held ordering key's first waiting message has waited, 0 when none. A FAILED head holds its key until retry or purge.", nil, nil),
		heldHead: prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", "held_ordering_key_head_id"),
			fmt.Sprintf("Id of the message holding each held ordering key (its head: FAILED, or PENDING until a retry or a Delay), for at most the %d longest-held keys.", outbox.MaxHeldListed),
			[]string{"ordering_key", "head_status"}, nil),
		broken: prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", "broken_ordering_keys"),
			"Ordering keys stalled by a row the runtime never leaves (a head entry whose message is missing, SENT or not the entry's, or an ordered PENDING message without its entry); a running worker repairs them. Alert on > 0.", nil, nil),
	}
	c.oldestSent = prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", "retention_oldest_sent_seconds"),
		"How long ago the oldest SENT row still in the table was sent, 0 when none. Near Config.Retention.Sent (default 24h) while retention runs; far above it, no worker of that row's event type is cleaning.", nil, nil)
	for _, o := range opts {
		o(c)
	}
	return c
}

// Describe implements prometheus.Collector.
func (c *StatsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.messages, c.due, c.oldest, c.oldestDue, c.stale, c.stuck, c.held, c.oldestHeld, c.heldHead, c.broken, c.paused, c.failing, c.oldestSent} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: one outbox.Stats query per call.
func (c *StatsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	s, err := outbox.Stats(ctx, c.db)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.messages, err)
		return
	}
	// Label values must be UTF-8 (MustNewConstMetric panics otherwise, taking the scrape and
	// the process down), and event_type is VARBINARY: a row written by other means than Enqueue
	// may hold any bytes.
	for eventType, tc := range outboxlabel.Keys(s.ByType, addCounts) {
		for _, st := range []struct {
			status outbox.Status
			n      int64
		}{{outbox.StatusPending, tc.Pending}, {outbox.StatusProcessing, tc.Processing}, {outbox.StatusFailed, tc.Failed}, {outbox.StatusCancelled, tc.Cancelled}} {
			ch <- prometheus.MustNewConstMetric(c.messages, prometheus.GaugeValue, float64(st.n), eventType, string(st.status))
		}
	}
	ch <- prometheus.MustNewConstMetric(c.due, prometheus.GaugeValue, float64(s.Due))
	ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, s.OldestPending.Seconds())
	ch <- prometheus.MustNewConstMetric(c.oldestDue, prometheus.GaugeValue, s.OldestDue.Seconds())
	ch <- prometheus.MustNewConstMetric(c.stale, prometheus.GaugeValue, float64(s.Stale))
	ch <- prometheus.MustNewConstMetric(c.stuck, prometheus.GaugeValue, float64(s.Stuck))
	ch <- prometheus.MustNewConstMetric(c.held, prometheus.GaugeValue, float64(s.HeldKeys))
	ch <- prometheus.MustNewConstMetric(c.oldestHeld, prometheus.GaugeValue, s.OldestHeld.Seconds())
	ch <- prometheus.MustNewConstMetric(c.broken, prometheus.GaugeValue, float64(s.BrokenKeys))
	c.collectFailing(ch, s)
	ch <- prometheus.MustNewConstMetric(c.oldestSent, prometheus.GaugeValue, s.OldestSent.Seconds())
	paused, err := outbox.Pauses(ctx, c.db)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.paused, err)
	}
	pausedSeen := make(map[string]bool, len(paused))
	for _, p := range paused {
		t := outboxlabel.Escape(p.EventType) // label values must be UTF-8
		if !pausedSeen[t] {
			pausedSeen[t] = true
			ch <- prometheus.MustNewConstMetric(c.paused, prometheus.GaugeValue, 1, t)
		}
	}
	seen := make(map[string]bool, len(s.Held))
	for _, h := range s.Held {
		key := outboxlabel.Escape(h.OrderingKey) // label values must be UTF-8
		if seen[key] {
			// Two keys that differ only in invalid bytes can escape alike (only by a key that is
			// not UTF-8 meeting one that spells out \xNN): a repeated series would fail the
			// whole scrape, so the longer-held one (listed first) is kept.
			continue
		}
		seen[key] = true
		ch <- prometheus.MustNewConstMetric(c.heldHead, prometheus.GaugeValue, float64(h.Head), key, string(h.HeadStatus))
	}
}

// addCounts adds the counts this collector reports, for event types that escape alike.
func addCounts(a, b outbox.TypeCounts) outbox.TypeCounts {
	a.Pending += b.Pending
	a.Processing += b.Processing
	a.Failed += b.Failed
	a.Cancelled += b.Cancelled
	return a
}
