package outboxprom

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/outboxgen/outboxgen/runtime/outbox"
	"github.com/outboxgen/outboxgen/runtime/outboxlabel"
)

func failingDesc() *prometheus.Desc {
	return prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", "failing_event_type"),
		"1 for each event type whose handlers keep failing: 5 or more of its messages wait for a retry and none was sent in the last 30s. It shows before any message is FAILED. Alert on it.",
		[]string{"event_type"}, nil)
}

// collectFailing sends a series per failing type of s, once per escaped label value.
func (c *StatsCollector) collectFailing(ch chan<- prometheus.Metric, s outbox.Snapshot) {
	seen := make(map[string]bool, len(s.Failing))
	for _, t := range s.Failing {
		l := outboxlabel.Escape(t) // label values must be UTF-8
		if !seen[l] {
			seen[l] = true
			ch <- prometheus.MustNewConstMetric(c.failing, prometheus.GaugeValue, 1, l)
		}
	}
}
