package outbox

import (
	"context"
	"errors"
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

func TestStatsScriptedScenario(t *testing.T) {
	db := migrated(t)
	ctx := context.Background()
	a := enqueueN(t, db.DB, "stats_a", 7)
	b := enqueueN(t, db.DB, "stats_b", 3)
	enqueueN(t, db.DB, "stats_a", 2, Delay(time.Hour)) // pending, not due
	// stats_a: a[0], a[1] stay pending and due; a[2] processing, fresh lease; a[3] stale (lease
	// 60s, claimed 100s ago); a[4] stuck (lease 60s, claimed 200s ago > 180s); a[5] sent; a[6] failed.
	setRow(t, db, a[2], processingSQL, -1, 59)
	setRow(t, db, a[3], processingSQL, -100, -40)
	setRow(t, db, a[4], processingSQL, -200, -140)
	setRow(t, db, a[5], sentSQL, -10)
	setRow(t, db, a[6], failedSQL, "boom", -5)
	// stats_b: b[0] pending; b[1], b[2] failed.
	setRow(t, db, b[1], failedSQL, "x", -5)
	setRow(t, db, b[2], failedSQL, "y", -5)
	// Age the oldest pending row of stats_a by 30s; a[1] has been due for 20s (OldestDue). The
	// delayed rows are older by created_at than nothing, and not due: they count for neither.
	setRow(t, db, a[0], "created_at = TIMESTAMPADD(SECOND, -30, UTC_TIMESTAMP(6))")
	setRow(t, db, a[1], "next_attempt_at = TIMESTAMPADD(SECOND, -20, UTC_TIMESTAMP(6))")

	s, err := Stats(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	wantA := TypeCounts{Pending: 4, Due: 2, Processing: 3, Stale: 2, Stuck: 1, Failed: 1}
	gotA := s.ByType["stats_a"]
	if gotA.OldestPending < 30*time.Second || gotA.OldestPending > 40*time.Second {
		t.Errorf("stats_a OldestPending = %v, want about 30s", gotA.OldestPending)
	}
	if gotA.OldestDue < 20*time.Second || gotA.OldestDue > 29*time.Second {
		t.Errorf("stats_a OldestDue = %v, want about 20s (a[1] has been due that long)", gotA.OldestDue)
	}
	gotA.OldestPending, gotA.OldestDue = 0, 0
	if gotA != wantA {
		t.Errorf("stats_a = %+v, want %+v", gotA, wantA)
	}
	gotB := s.ByType["stats_b"]
	if gotB.OldestDue > 10*time.Second {
		t.Errorf("stats_b OldestDue = %v, want about 0 (its pending row became due at enqueue)", gotB.OldestDue)
	}
	gotB.OldestPending, gotB.OldestDue = 0, 0
	if want := (TypeCounts{Pending: 1, Due: 1, Failed: 2}); gotB != want {
		t.Errorf("stats_b = %+v, want %+v", gotB, want)
	}
	if s.Pending != 5 || s.Due != 3 || s.Processing != 3 || s.Stale != 2 || s.Stuck != 1 || s.Failed != 3 || len(s.ByType) != 2 {
		t.Errorf("totals = %+v, want pending 5, due 3, processing 3, stale 2, stuck 1, failed 3, 2 types", s)
	}
	if s.OldestPending != s.ByType["stats_a"].OldestPending || s.OldestDue != s.ByType["stats_a"].OldestDue {
		t.Errorf("total OldestPending/OldestDue %v/%v != stats_a's %+v", s.OldestPending, s.OldestDue, s.ByType["stats_a"])
	}

	empty := migrated(t)
	s, err = Stats(ctx, empty)
	if err != nil || s.Pending != 0 || s.OldestPending != 0 || s.OldestDue != 0 || len(s.ByType) != 0 {
		t.Fatalf("Stats on an empty table = %+v, %v", s, err)
	}
}

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

func TestOnce(t *testing.T) {
	db := migrated(t)
	ctx := context.Background()
	once := func(consumer, key string, commit bool) bool {
		t.Helper()
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		first, err := Once(ctx, tx, consumer, key)
		if err != nil {
			_ = tx.Rollback()
			t.Fatal(err)
		}
		if commit {
			err = tx.Commit()
		} else {
			err = tx.Rollback()
		}
		if err != nil {
			t.Fatal(err)
		}
		return first
	}
	if !once("mailer", "k1", false) {
		t.Fatal("first Once in a rolled-back tx: want true")
	}
	if !once("mailer", "k1", true) {
		t.Fatal("Once after a rollback: want true (the rollback recorded nothing)")
	}
	if once("mailer", "k1", true) {
		t.Fatal("second committed Once: want false")
	}
	if !once("billing", "k1", true) {
		t.Fatal("another consumer with the same key: want true")
	}
	if _, err := Once(ctx, db, "", "k"); err == nil {
		t.Fatal("empty consumer: want an error")
	}
	if _, err := Once(ctx, db, "c", strings.Repeat("x", 192)); err == nil {
		t.Fatal("192-character key: want an error")
	}
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM outbox_inbox").Scan(&n); err != nil || n != 2 {
		t.Fatalf("outbox_inbox rows = %d, %v; want 2", n, err)
	}
}

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

// Retry moves any number of rows, batch after batch.
func TestRetryMovesMoreThanOneBatch(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	enqueueN(t, db.DB, "many", retryBatch+7)
	db.MustExec(t, "UPDATE outbox_messages SET status='FAILED', failed_at=UTC_TIMESTAMP(6), next_attempt_at=LEAST(next_attempt_at, failed_at)")
	if n, err := Retry(ctx, db, Filter{}); err != nil || n != retryBatch+7 {
		t.Fatalf("Retry(all) = %d, %v; want %d", n, err, retryBatch+7)
	}
	if got := countRows(t, db, "status='PENDING' AND attempts=0"); got != retryBatch+7 {
		t.Fatalf("%d rows PENDING after Retry, want %d", got, retryBatch+7)
	}
}

func TestInspect(t *testing.T) {
	db := migrated(t)
	ctx := context.Background()
	id, err := Enqueue(ctx, db, Message{EventType: "inspect_me", Payload: []byte(`{"a":1}`), IdempotencyKey: "k1", MaxAttempts: 4}, Standalone())
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("line of a long error\n", 40)
	setRow(t, db, id, failedSQL, long, -5)
	r, err := Inspect(ctx, db, id)
	if err != nil {
		t.Fatal(err)
	}
	if r.ID != id || r.EventType != "inspect_me" || string(r.Payload) != `{"a":1}` || r.IdempotencyKey != "k1" ||
		r.Status != StatusFailed || r.Attempts != 4 || r.MaxAttempts != 4 || r.LastError != long ||
		r.FailedAt.IsZero() || !r.SentAt.IsZero() || r.CreatedAt.IsZero() || r.NextAttemptAt.IsZero() {
		t.Fatalf("Inspect = %+v", r)
	}
	if _, err := Inspect(ctx, db, id+1000); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Inspect(missing) err = %v, want ErrNotFound", err)
	}
}
