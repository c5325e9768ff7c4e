package outbox

import (
	"context"
	"testing"
	"time"
)

// Purge must stop reading at its cutoff: a table keeps every SENT row of the retention window,
// and each Purge call ends with a batch that finds fewer rows than its limit.
func TestPurgeReadsOnlyUpToItsCutoff(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	for _, st := range []Status{StatusSent, StatusFailed} {
		db.MustExec(t, "DELETE FROM outbox_messages")
		enqueueN(t, db.DB, "purge", 3000)
		col := "sent_at"
		if st == StatusFailed {
			col = "failed_at"
		}
		db.MustExec(t, "UPDATE outbox_messages SET status = ?, "+col+" = next_attempt_at", string(st))
		// The 10 oldest: due and finished two hours ago.
		db.MustExec(t, "UPDATE outbox_messages SET next_attempt_at = next_attempt_at - INTERVAL 2 HOUR, "+col+" = "+col+" - INTERVAL 2 HOUR ORDER BY id LIMIT 10")
		pool := db.Open(t)
		pool.SetMaxOpenConns(1) // one session, so its counters are the purge's
		reads := func() int { return sessionStatus(t, pool, "Handler_read_next") }
		before := reads()
		n, err := Purge(ctx, pool, PurgeFilter{Status: st, OlderThan: time.Hour, BatchSize: 100})
		if err != nil || n != 10 {
			t.Fatalf("%s: Purge = %d, %v; want the 10 old rows", st, n, err)
		}
		if r := reads() - before; r > 500 {
			t.Errorf("%s: Purge read %d index entries to delete 10 of 3,010 rows; it should stop at its cutoff", st, r)
		}
		if left := countRows(t, db, "1=1"); left != 2990 {
			t.Fatalf("%s: %d rows left, want 2990", st, left)
		}
	}
}

// Purge's dry run counts exactly what the purge then deletes; IDs delete exactly those rows of
// the status, whatever their age; a row made FAILED by hand without failed_at is purged by its
// due time instead of never.
func TestPurgeDryRunIDsAndHandMadeFailures(t *testing.T) {
	db := migrated(t)
	ctx := context.Background()
	ids := enqueueN(t, db.DB, "purge_x", 6)
	setRow(t, db, ids[0], sentSQL, -7200)
	setRow(t, db, ids[1], sentSQL, -7200)
	setRow(t, db, ids[2], sentSQL, -10)
	setRow(t, db, ids[3], failedSQL, "fresh", -10)
	// By hand, as an operator parks a message: no failed_at, due two days ago.
	setRow(t, db, ids[4], "status='FAILED', next_attempt_at=TIMESTAMPADD(DAY, -2, UTC_TIMESTAMP(6))")
	// ids[5] stays PENDING.

	dry, err := Purge(ctx, db.DB, PurgeFilter{Status: StatusSent, OlderThan: time.Hour, DryRun: true})
	if err != nil || dry != 2 || countRows(t, db, "status='SENT'") != 3 {
		t.Fatalf("dry run = %d, %v (SENT rows now %d); want 2 counted, none deleted", dry, err, countRows(t, db, "status='SENT'"))
	}
	n, err := Purge(ctx, db.DB, PurgeFilter{Status: StatusSent, OlderThan: time.Hour})
	if err != nil || n != dry {
		t.Fatalf("purge = %d, %v; want the dry run's %d", n, err, dry)
	}

	dry, err = Purge(ctx, db.DB, PurgeFilter{Status: StatusFailed, OlderThan: 24 * time.Hour, DryRun: true})
	if err != nil || dry != 1 {
		t.Fatalf("FAILED dry run = %d, %v; want 1 (the hand-made failure, by its due time)", dry, err)
	}
	n, err = Purge(ctx, db.DB, PurgeFilter{Status: StatusFailed, OlderThan: 24 * time.Hour})
	if err != nil || n != 1 || countRows(t, db, "id = ?", int64(ids[4])) != 0 {
		t.Fatalf("FAILED purge = %d, %v; want the hand-made failure deleted", n, err)
	}

	// By id: the fresh FAILED row goes whatever its age; the PENDING and SENT ones given with it
	// do not match the status and stay.
	f := PurgeFilter{Status: StatusFailed, IDs: []MessageID{ids[3], ids[5], ids[2], 999999}, DryRun: true}
	if dry, err = Purge(ctx, db.DB, f); err != nil || dry != 1 {
		t.Fatalf("by-id dry run = %d, %v; want 1", dry, err)
	}
	f.DryRun = false
	if n, err = Purge(ctx, db.DB, f); err != nil || n != 1 || countRows(t, db, "id = ?", int64(ids[3])) != 0 {
		t.Fatalf("by-id purge = %d, %v; want only the FAILED row deleted", n, err)
	}
	if got := countRows(t, db, "id IN (?, ?)", int64(ids[2]), int64(ids[5])); got != 2 {
		t.Fatalf("by-id purge deleted rows of other statuses: %d of 2 left", got)
	}
	if _, err := Purge(ctx, db.DB, PurgeFilter{Status: StatusFailed, IDs: make([]MessageID, maxPurgeIDs+1)}); err == nil {
		t.Fatal("Purge with too many IDs: want an error")
	}
	if _, err := Purge(ctx, db.DB, PurgeFilter{Status: StatusFailed, IDs: ids[:1], OlderThan: time.Hour}); err == nil {
		t.Fatal("Purge with IDs and OlderThan: want an error, not a silently ignored retention")
	}
	// In batches of 2 ids.
	more := enqueueN(t, db.DB, "purge_y", 5)
	for _, id := range more {
		setRow(t, db, id, failedSQL, "x", -1)
	}
	if n, err := Purge(ctx, db.DB, PurgeFilter{Status: StatusFailed, IDs: more, BatchSize: 2}); err != nil || n != 5 {
		t.Fatalf("by-id purge in batches of 2 = %d, %v; want 5", n, err)
	}
}
