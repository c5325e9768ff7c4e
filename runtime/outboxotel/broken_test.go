package outboxotel_test

import (
	"testing"

	"github.com/outboxgen/outboxgen/runtime/outboxotel"
	"github.com/outboxgen/outboxgen/runtime/outboxtest/testdb"
)

// One ordered PENDING row without its queue entry, alone under its type, once failed every
// collection (Stats failed on a NULL sum). Now the collection succeeds, counts the row pending
// and not due, and outboxgen.broken_ordering_keys counts its key with a head-missing one.
func TestStatsGaugesBrokenKeys(t *testing.T) {
	t.Parallel()
	db := testdb.Migrated(t)
	db.BrokenKey(t, "acct:1", "odd_type", testdb.BrokenNotQueued, 5)
	db.BrokenKey(t, "acct:2", "other_type", testdb.BrokenHeadMissing, 5) // a type of its own: odd_type holds only the odd row
	m := newMetrics(t)
	if _, err := outboxotel.RegisterStats(db, outboxotel.WithMeterProvider(m.mp)); err != nil {
		t.Fatal(err)
	}
	got := m.mustCollect(t)
	if v, n := point(got["outboxgen.broken_ordering_keys"], nil); n != 1 || v != 2 {
		t.Errorf("outboxgen.broken_ordering_keys = %v (%d points), want 2", v, n)
	}
	if v, _ := point(got["outboxgen.messages"], map[string]string{"messaging.destination.name": "odd_type", "outboxgen.status": "PENDING"}); v != 1 {
		t.Errorf("outboxgen.messages{odd_type,PENDING} = %v, want 1", v)
	}
	if v, _ := point(got["outboxgen.due.messages"], nil); v != 0 {
		t.Errorf("outboxgen.due.messages = %v, want 0 (neither row can be claimed)", v)
	}
}
