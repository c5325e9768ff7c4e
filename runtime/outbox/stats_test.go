package outbox

import (
	"context"
	"testing"
	"time"
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
