package outboxprom_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/outboxgen/outboxgen/runtime/outbox"
	"github.com/outboxgen/outboxgen/runtime/outboxprom"
)

// The rows retention passes deleted, per table.
func TestObserverCountsRetention(t *testing.T) {
	t.Parallel()
	obs := outboxprom.NewObserver()
	var _ outbox.RetentionObserver = obs
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(obs)
	obs.Retained(outbox.TableMessages, 1000)
	obs.Retained(outbox.TableMessages, 5)
	obs.Retained(outbox.TableOrdering, 3)
	obs.Retained(outbox.TableJobRuns, 0)
	want := `
# HELP outbox_retention_deleted_total Rows this process's retention passes deleted, by table (SENT and FAILED messages, ordering counters, job ledger rows, expired Once keys).
# TYPE outbox_retention_deleted_total counter
outbox_retention_deleted_total{table="outbox_messages"} 1005
outbox_retention_deleted_total{table="outbox_ordering"} 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "outbox_retention_deleted_total"); err != nil {
		t.Error(err)
	}
}
