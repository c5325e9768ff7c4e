package outbox

import (
	"context"
	"strings"
	"testing"
	"time"
)

// setRow forces a row into a state with SQL, as a crashed or hung worker would leave it.
// Times are offsets in seconds from the database clock.
func setRow(t testing.TB, db DBTX, id MessageID, set string, args ...any) {
	t.Helper()
	args = append(args, int64(id))
	res, err := db.ExecContext(context.Background(), "UPDATE outbox_messages SET "+set+" WHERE id = ?", args...)
	if err != nil {
		t.Fatalf("set row %d: %v", id, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("set row %d: %d rows affected", id, n)
	}
}

const (
	processingSQL = "status='PROCESSING', attempts=1, claim_token='t', claimed_at=TIMESTAMPADD(SECOND, ?, UTC_TIMESTAMP(6)), reclaim_after=TIMESTAMPADD(SECOND, ?, UTC_TIMESTAMP(6))"
	// A real row was due before it failed or was sent (Purge relies on it): single-table UPDATE
	// assignments run left to right, so LEAST sees the new time.
	failedSQL = "status='FAILED', attempts=max_attempts, last_error=?, failed_at=TIMESTAMPADD(SECOND, ?, UTC_TIMESTAMP(6)), next_attempt_at=LEAST(next_attempt_at, failed_at)"
	sentSQL   = "status='SENT', attempts=1, sent_at=TIMESTAMPADD(SECOND, ?, UTC_TIMESTAMP(6)), next_attempt_at=LEAST(next_attempt_at, sent_at)"
)

func TestListFailedRetryPurge(t *testing.T) {
	db := migrated(t)
	ctx := context.Background()
	a := enqueueN(t, db.DB, "ops_a", 3)
	b := enqueueN(t, db.DB, "ops_b", 2)
	setRow(t, db, a[0], failedSQL, "old failure", -3600)
	setRow(t, db, a[1], failedSQL, "new failure", -10)
	setRow(t, db, b[0], failedSQL, "b failure", -10)
	setRow(t, db, b[1], sentSQL, -7200)
	setRow(t, db, a[2], sentSQL, -10)

	all, err := ListFailed(ctx, db, Filter{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 3 || all[0].ID != a[0] || all[0].LastError != "old failure" || all[0].Attempts != all[0].MaxAttempts || all[0].FailedAt.IsZero() {
		t.Fatalf("ListFailed(all) = %+v, want 3 rows, oldest failure first with its last_error", all)
	}
	onlyA, err := ListFailed(ctx, db, Filter{EventType: "ops_a"}, 10)
	if err != nil || len(onlyA) != 2 {
		t.Fatalf("ListFailed(ops_a) = %d rows, %v; want 2", len(onlyA), err)
	}
	since, err := ListFailed(ctx, db, Filter{FailedSince: dbNow(t, db).Add(-time.Minute)}, 10)
	if err != nil || len(since) != 2 {
		t.Fatalf("ListFailed(since 1m) = %d rows, %v; want 2", len(since), err)
	}
	byID, err := ListFailed(ctx, db, Filter{IDs: []MessageID{b[0], b[1]}}, 10)
	if err != nil || len(byID) != 1 || byID[0].ID != b[0] {
		t.Fatalf("ListFailed(ids) = %+v, %v; want only %d (the other is SENT)", byID, err, b[0])
	}
	limited, err := ListFailed(ctx, db, Filter{}, 1)
	if err != nil || len(limited) != 1 {
		t.Fatalf("ListFailed(limit 1) = %d rows", len(limited))
	}

	n, err := Retry(ctx, db, Filter{EventType: "ops_a", DryRun: true})
	if err != nil || n != 2 {
		t.Fatalf("Retry dry run = %d, %v; want 2", n, err)
	}
	if got := countRows(t, db, "status='FAILED'"); got != 3 {
		t.Fatalf("dry run changed rows: %d FAILED, want 3", got)
	}
	n, err = Retry(ctx, db, Filter{IDs: []MessageID{a[1]}})
	if err != nil || n != 1 {
		t.Fatalf("Retry(id) = %d, %v; want 1", n, err)
	}
	r := getRow(t, db, a[1])
	if r.Status != "PENDING" || r.Attempts != 0 || r.FailedAt.Valid || r.NextAttemptAt.After(dbNow(t, db)) {
		t.Fatalf("retried row = %+v, want PENDING, attempts 0, due now", r)
	}

	if _, err := Purge(ctx, db.DB, PurgeFilter{Status: StatusPending}); err == nil || !strings.Contains(err.Error(), "Status") {
		t.Fatalf("Purge(PENDING) err = %v, want a Status error", err)
	}
	if _, err := Purge(ctx, db.DB, PurgeFilter{Status: StatusSent, OlderThan: -time.Second}); err == nil || !strings.Contains(err.Error(), "OlderThan") {
		t.Fatalf("Purge(negative) err = %v, want an OlderThan error", err)
	}
	n, err = Purge(ctx, db.DB, PurgeFilter{Status: StatusSent, OlderThan: time.Hour})
	if err != nil || n != 1 || countRows(t, db, "id = ?", int64(b[1])) != 0 || countRows(t, db, "id = ?", int64(a[2])) != 1 {
		t.Fatalf("Purge(SENT > 1h) = %d, %v; want only the 2h-old row deleted", n, err)
	}
	// Many rows in batches of 7.
	more := enqueueN(t, db.DB, "ops_purge", 50)
	if _, err := db.Exec("UPDATE outbox_messages SET status='FAILED', failed_at=TIMESTAMPADD(DAY, -2, UTC_TIMESTAMP(6)), next_attempt_at=failed_at WHERE event_type='ops_purge'"); err != nil {
		t.Fatal(err)
	}
	n, err = Purge(ctx, db.DB, PurgeFilter{Status: StatusFailed, OlderThan: 24 * time.Hour, BatchSize: 7})
	if err != nil || n != int64(len(more)) {
		t.Fatalf("Purge(FAILED > 1d, batch 7) = %d, %v; want %d", n, err, len(more))
	}
	if got := countRows(t, db, "status='FAILED'"); got != 2 {
		t.Fatalf("after purge %d FAILED rows, want the 2 recent ones", got)
	}
}

// The operator's writes by id lock only their own rows: a FAILED row that another transaction
// holds (an admin's SELECT ... FOR UPDATE, a worker) does not make purge or retry of other
// rows wait. Left to the optimizer, the purge scanned the claim index (or the table) and
// waited on every row it passed.
func TestOperatorWritesByIDDoNotWaitOnOtherRows(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	// The shape in which the optimizer scans the claim index's FAILED entries for a DELETE by
	// status and id (EXPLAIN: key outbox_messages_claim): many rows, some FAILED, a few hundred
	// ids given, most of them not FAILED.
	ids := enqueueN(t, db.DB, "by_id", 2000)
	db.MustExec(t, "UPDATE outbox_messages SET status='FAILED', failed_at=UTC_TIMESTAMP(6), next_attempt_at=LEAST(next_attempt_at, failed_at) WHERE id <= ?", int64(ids[199]))
	db.MustExec(t, "ANALYZE TABLE outbox_messages")
	holder, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback()
	var held int64
	if err := holder.QueryRowContext(ctx, "SELECT id FROM outbox_messages WHERE id = ? FOR UPDATE", int64(ids[0])).Scan(&held); err != nil {
		t.Fatal(err)
	}
	// The server's lock wait (50s by default) would outlast this.
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if n, err := Purge(wctx, db.DB, PurgeFilter{Status: StatusFailed, IDs: ids[100:400]}); err != nil || n != 100 {
		t.Fatalf("purge by id beside a held row = %d, %v; want the 100 FAILED ones at once", n, err)
	}
	if n, err := Retry(wctx, db.DB, Filter{IDs: ids[50:350]}); err != nil || n != 50 {
		t.Fatalf("retry by id beside a held row = %d, %v; want the 50 FAILED ones at once", n, err)
	}
}
