package outbox

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/internal/testdb"
)

// Filter.FailedWithin is measured on the database clock: a pool whose sessions see the clock two
// hours behind this machine (SET timestamp at connect) still finds the row that failed a minute
// ago on that clock, and not the one that failed 61 minutes ago.
func TestFilterFailedWithinUsesTheDatabaseClock(t *testing.T) {
	db := migrated(t)
	ctx := context.Background()
	ids := enqueueN(t, db.DB, "window", 2)
	setRow(t, db, ids[0], failedSQL, "recent", -(2*3600 + 60))
	setRow(t, db, ids[1], failedSQL, "old", -(2*3600 + 61*60))
	behind := openBehind(t, db, 2)

	f := Filter{FailedWithin: time.Hour}
	list, err := ListFailed(ctx, behind, f, 10)
	if err != nil || len(list) != 1 || list[0].ID != ids[0] {
		t.Errorf("ListFailed(FailedWithin 1h) = %+v, %v; want only message %d", list, err, ids[0])
	}
	f.DryRun = true
	if n, err := Retry(ctx, behind, f); err != nil || n != 1 {
		t.Errorf("Retry(FailedWithin 1h, DryRun) = %d, %v; want 1", n, err)
	}
	// With FailedSince too, the later cutoff applies.
	f.FailedSince = time.Now().Add(-365 * 24 * time.Hour)
	if n, err := Retry(ctx, behind, f); err != nil || n != 1 {
		t.Errorf("Retry(FailedWithin 1h, FailedSince a year ago) = %d, %v; want 1", n, err)
	}
	if _, err := Retry(ctx, behind, Filter{FailedWithin: -time.Second, DryRun: true}); err == nil || !strings.Contains(err.Error(), "FailedWithin must not be negative") {
		t.Errorf("Retry(FailedWithin -1s) = %v; want an error naming FailedWithin", err)
	}
}

// openBehind opens a pool on db's database whose sessions see the clock hours behind.
func openBehind(t *testing.T, db *testdb.DB, hours int) *sql.DB {
	t.Helper()
	var ts string
	if err := db.QueryRow("SELECT UNIX_TIMESTAMP(NOW(6)) - ?", hours*3600).Scan(&ts); err != nil {
		t.Fatal(err)
	}
	sep := "?"
	if strings.Contains(db.DSN, "?") {
		sep = "&"
	}
	p, err := sql.Open("mysql", db.DSN+sep+"timestamp="+ts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}
