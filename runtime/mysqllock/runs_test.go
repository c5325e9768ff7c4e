package mysqllock

import (
	"context"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/internal/testdb"
)

// TestLastRunsAndRuns reads a ledger written by hand: each job's latest period, ordered by
// job, and one job's runs newest first. Job names compare as bytes ("Nightly" is not "nightly").
func TestLastRunsAndRuns(t *testing.T) {
	t.Parallel()
	db := testdb.Migrated(t)
	ctx := context.Background()
	day := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	add := func(job string, period time.Time, instance string) {
		db.MustExec(t, `INSERT INTO outbox_job_runs (job, period_start, instance, started_at, finished_at)
			VALUES (?, ?, ?, ?, ?)`, job, period, instance, period.Add(time.Second), period.Add(3*time.Second))
	}
	add("nightly", day, "a")
	add("nightly", day.Add(24*time.Hour), "b")
	add("nightly", day.Add(-24*time.Hour), "a")
	add("Nightly", day, "c")
	add("report", day.Add(time.Hour), "")

	last, err := LastRuns(ctx, db.DB, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []JobRun{
		{Job: "Nightly", PeriodStart: day, Instance: "c"},
		{Job: "nightly", PeriodStart: day.Add(24 * time.Hour), Instance: "b"},
		{Job: "report", PeriodStart: day.Add(time.Hour)},
	}
	if len(last) != len(want) {
		t.Fatalf("LastRuns = %+v, want %d runs", last, len(want))
	}
	for i, w := range want {
		g := last[i]
		if g.Job != w.Job || !g.PeriodStart.Equal(w.PeriodStart) || g.Instance != w.Instance ||
			!g.StartedAt.Equal(w.PeriodStart.Add(time.Second)) || !g.FinishedAt.Equal(w.PeriodStart.Add(3*time.Second)) {
			t.Errorf("LastRuns[%d] = %+v, want %+v (started 1s and finished 3s after the period)", i, g, w)
		}
	}
	if two, err := LastRuns(ctx, db.DB, 2); err != nil || len(two) != 2 {
		t.Errorf("LastRuns(limit 2) = %d runs, %v; want 2", len(two), err)
	}

	runs, err := Runs(ctx, db.DB, "nightly", 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 || !runs[0].PeriodStart.Equal(day.Add(24*time.Hour)) || !runs[1].PeriodStart.Equal(day) {
		t.Errorf("Runs(nightly, 2) = %+v, want the periods of Dec 2 then Dec 1", runs)
	}
	if none, err := Runs(ctx, db.DB, "never", 0); err != nil || len(none) != 0 {
		t.Errorf("Runs(never) = %+v, %v; want none", none, err)
	}
}
