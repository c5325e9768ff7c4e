package outboxprom_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/outboxgen/outboxgen/runtime/outboxprom"
	"github.com/outboxgen/outboxgen/runtime/outboxtest/testdb"
)

// One ordered PENDING row without its queue entry, alone under its type, once failed every
// scrape (Stats failed on a NULL sum). Now the scrape succeeds, counts the row pending and not
// due, and outbox_broken_ordering_keys counts its key with a head-missing one.
func TestStatsCollectorBrokenKeys(t *testing.T) {
	t.Parallel()
	db := testdb.Migrated(t)
	db.BrokenKey(t, "acct:1", "odd_type", testdb.BrokenNotQueued, 5)
	db.BrokenKey(t, "acct:2", "other_type", testdb.BrokenHeadMissing, 5) // a type of its own: odd_type holds only the odd row
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(outboxprom.NewStatsCollector(db))
	want := `
# HELP outbox_broken_ordering_keys Ordering keys stalled by a row the runtime never leaves (a head entry whose message is missing, SENT or not the entry's, or an ordered PENDING message without its entry); a running worker repairs them. Alert on > 0.
# TYPE outbox_broken_ordering_keys gauge
outbox_broken_ordering_keys 2
# HELP outbox_due_messages PENDING rows whose next_attempt_at has passed: waiting only for a worker.
# TYPE outbox_due_messages gauge
outbox_due_messages 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "outbox_broken_ordering_keys", "outbox_due_messages"); err != nil {
		t.Error(err)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}
