package outboxprom_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/outboxgen/outboxgen/runtime/outbox"
	"github.com/outboxgen/outboxgen/runtime/outboxprom"
)

// The observer's mapping from events to series, fed by hand; the worker-driven test is in
// worker_test.go.
func TestObserverMapsEvents(t *testing.T) {
	t.Parallel()
	obs := outboxprom.NewObserver()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(obs)

	obs.Claimed(3, 2*time.Millisecond)
	obs.Claimed(0, time.Millisecond) // an empty claim still has a duration
	obs.Claimed(-1, time.Millisecond)
	obs.Handled("a", outbox.OutcomeSent, 10*time.Millisecond)
	obs.Handled("a", outbox.OutcomeSent, 20*time.Millisecond)
	obs.Handled("a", outbox.OutcomeRetried, 30*time.Millisecond)
	obs.Handled("b", outbox.OutcomeFailed, 40*time.Millisecond)
	obs.Reclaimed(2)
	obs.Reclaimed(0)
	obs.Stuck(4)
	obs.HandedOff(2) // InTx's handoffs: claimed too, without a claim duration
	obs.HandedOff(0)

	want := `
# HELP outbox_claimed_total Rows claimed by this process's workers: by a claim transaction, or handed off by InTx already claimed (outbox_handed_off_total).
# TYPE outbox_claimed_total counter
outbox_claimed_total 5
# HELP outbox_handed_off_total Rows InTx handed off to this process's workers, born claimed: no claim transaction (outbox_claim_duration_seconds does not count them).
# TYPE outbox_handed_off_total counter
outbox_handed_off_total 2
# HELP outbox_sent_total Handler calls that ended with the message SENT.
# TYPE outbox_sent_total counter
outbox_sent_total{event_type="a"} 2
# HELP outbox_retried_total Handler calls that failed with attempts left: the message went back to PENDING with a backoff.
# TYPE outbox_retried_total counter
outbox_retried_total{event_type="a"} 1
# HELP outbox_failed_total Handler calls that ended with the message FAILED (permanent error, attempts exhausted, undecodable payload).
# TYPE outbox_failed_total counter
outbox_failed_total{event_type="b"} 1
# HELP outbox_reclaimed_total PROCESSING rows whose lease expired, moved back to PENDING (or FAILED when exhausted) by this process's reclaim passes.
# TYPE outbox_reclaimed_total counter
outbox_reclaimed_total 2
# HELP outbox_stuck_seen_total Rows seen PROCESSING past 3x their lease, summed over watch passes. Any increase means nobody is reclaiming.
# TYPE outbox_stuck_seen_total counter
outbox_stuck_seen_total 4
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"outbox_claimed_total", "outbox_handed_off_total", "outbox_sent_total", "outbox_retried_total", "outbox_failed_total",
		"outbox_reclaimed_total", "outbox_stuck_seen_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(obs, "outbox_handler_duration_seconds"); n != 3 {
		t.Errorf("handler duration series = %d, want 3 (a/sent, a/retried, b/failed)", n)
	}
	if got := histogramCount(t, reg, "outbox_claim_duration_seconds", nil); got != 3 {
		t.Errorf("claim duration observations = %d, want 3 (empty claims included)", got)
	}
	if got := histogramCount(t, reg, "outbox_handler_duration_seconds",
		map[string]string{"event_type": "a", "outcome": "sent"}); got != 2 {
		t.Errorf("a/sent handler observations = %d, want 2", got)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

// histogramCount returns the sample count of the histogram series of name whose labels
// include want.
func histogramCount(t *testing.T, g prometheus.Gatherer, name string, want map[string]string) uint64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue metrics
				}
			}
			return m.GetHistogram().GetSampleCount()
		}
	}
	return 0
}
