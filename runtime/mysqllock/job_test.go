package mysqllock

import (
	"context"
	"database/sql"
	"errors"
	"sync/atomic"
	"testing"
	"time"
	_ "time/tzdata" // Asia/Seoul and America/New_York without depending on the host's zoneinfo

	"github.com/outboxgen/outboxgen/internal/testdb"
	"github.com/outboxgen/outboxgen/internal/testutil"
)

func mustLoc(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func TestSchedule(t *testing.T) {
	t.Parallel()
	seoul := mustLoc(t, "Asia/Seoul")
	ny := mustLoc(t, "America/New_York")
	utc := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	cases := []struct {
		name         string
		s            Schedule
		now          time.Time
		next, period time.Time
	}{
		{"every hour fires on the hour", Every(time.Hour), utc("2026-03-10T10:15:00Z"), utc("2026-03-10T11:00:00Z"), utc("2026-03-10T11:00:00Z")},
		{"every hour, exactly on a tick, fires at the next", Every(time.Hour), utc("2026-03-10T11:00:00Z"), utc("2026-03-10T12:00:00Z"), utc("2026-03-10T12:00:00Z")},
		{"every 90s", Every(90 * time.Second), utc("2026-03-10T00:00:01Z"), utc("2026-03-10T00:01:30Z"), utc("2026-03-10T00:01:30Z")},
		// 02:59:59 KST on March 10 is 17:59:59 UTC on March 9; the period is March 10 in Seoul,
		// whose midnight is March 9 15:00 UTC.
		{"daily before the time fires today", Daily(3, 0, seoul), utc("2026-03-09T17:59:59Z"), utc("2026-03-09T18:00:00Z"), utc("2026-03-09T15:00:00Z")},
		{"daily at the time fires tomorrow", Daily(3, 0, seoul), utc("2026-03-09T18:00:00Z"), utc("2026-03-10T18:00:00Z"), utc("2026-03-10T15:00:00Z")},
		{"daily nil location is UTC", Daily(0, 30, nil), utc("2026-03-10T23:59:00Z"), utc("2026-03-11T00:30:00Z"), utc("2026-03-11T00:00:00Z")},
		// March 8 2026: New York skips 02:00-03:00. Go's time.Date reads the missing 02:30 with
		// the offset after the change (EDT), which is 06:30 UTC, 01:30 EST: the job runs an hour
		// early that day (documented on Daily). The day still starts at midnight EST, 05:00 UTC.
		{"daily in a skipped DST hour", Daily(2, 30, ny), utc("2026-03-08T05:00:00Z"), utc("2026-03-08T06:30:00Z"), utc("2026-03-08T05:00:00Z")},
		// November 1 2026: 01:30 happens twice in New York; time.Date picks the first (EDT).
		{"daily in a repeated DST hour", Daily(1, 30, ny), utc("2026-11-01T04:00:00Z"), utc("2026-11-01T05:30:00Z"), utc("2026-11-01T04:00:00Z")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := c.s.validate(); err != nil {
				t.Fatal(err)
			}
			next := c.s.Next(c.now)
			if !next.Equal(c.next) {
				t.Fatalf("%v: Next(%v) = %v, want %v", c.s, c.now.UTC(), next.UTC(), c.next)
			}
			p := c.s.PeriodStart(next)
			if !p.Equal(c.period) || p.Location() != time.UTC {
				t.Fatalf("%v: PeriodStart(%v) = %v, want %v in UTC", c.s, next.UTC(), p, c.period)
			}
		})
	}
	for _, bad := range []Schedule{{}, Every(0), Every(-time.Second), Daily(24, 0, nil), Daily(3, 60, nil), Daily(-1, 0, nil)} {
		if bad.validate() == nil {
			t.Errorf("%v: want a validation error", bad)
		}
	}
}

func TestRunJobRejectsInvalidJobs(t *testing.T) {
	t.Parallel()
	l := New(nil)
	ok := func(context.Context) error { return nil }
	for _, j := range []Job{
		{Name: "", Schedule: Every(time.Second), Run: ok},
		{Name: string(make([]byte, MaxJobName+1)), Schedule: Every(time.Second), Run: ok},
		{Name: "x", Schedule: Every(time.Second)},
		{Name: "x", Run: ok},
	} {
		if err := l.RunJob(context.Background(), j); err == nil {
			t.Errorf("RunJob(%+v) = nil, want an error at once", j)
		}
	}
}

// A tick that arrives while the previous run still goes is skipped and counted; runs in one
// process never overlap.
func TestRunJobSkipsOverlappingTicks(t *testing.T) {
	t.Parallel()
	d := testdb.Migrated(t)
	l := New(d.DB, WithWatchdog(50*time.Millisecond))
	name := lockName(d, "slow")
	release := make(chan struct{})
	var active, maxActive, runs atomic.Int32
	j := Job{Name: name, Schedule: Every(20 * time.Millisecond), Run: func(ctx context.Context) error {
		a := active.Add(1)
		defer active.Add(-1)
		if a > maxActive.Load() {
			maxActive.Store(a)
		}
		if runs.Add(1) == 1 {
			select { // the first run outlives several ticks
			case <-release:
			case <-time.After(10 * time.Second):
				return errors.New("never released")
			}
		}
		return nil
	}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.RunJob(ctx, j) }()

	testutil.Eventually(t, 10*time.Second, "3 skipped ticks counted", func() bool { return l.JobStats(name).SkippedRunning >= 3 })
	if n := runs.Load(); n != 1 {
		t.Fatalf("%d runs started while the first was still going, want 1", n)
	}
	close(release)
	// Ticks run again once the first run is over.
	testutil.Eventually(t, 10*time.Second, "runs after the slow one", func() bool { return l.JobStats(name).Runs >= 3 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	st := l.JobStats(name)
	t.Logf("stats %+v", st)
	if maxActive.Load() != 1 || st.Failed != 0 {
		t.Fatalf("max concurrency %d (want 1), stats %+v", maxActive.Load(), st)
	}
}

// A daily job on several instances in separate processes runs once for the period. Each
// process's clock is shifted to just before 03:00 in Seoul; one instance's clock runs late, so
// it ticks after the winner finished and released the lock, and only the ledger stops it.
// The control without OncePerPeriod shows that instance running the period again.
type dailyArgs struct {
	Job              string // unique per test: the lock "job:"+Job is server-wide
	SkewNs, RunForNs int64
	OncePerPeriod    bool
	Instance         string
}

type dailyResult struct {
	Stats JobStats
	Late  bool // the process reached RunJob after its tick: the run tells nothing
}

func helperDailyJob(db *sql.DB, a dailyArgs) (dailyResult, error) {
	seoul, err := time.LoadLocation("Asia/Seoul")
	if err != nil {
		return dailyResult{}, err
	}
	sched := Daily(3, 0, seoul)
	l := New(db, WithWatchdog(50*time.Millisecond), WithInstance(a.Instance))
	start, err := awaitStart(db)
	if err != nil {
		return dailyResult{}, err
	}
	// At the start line every process believes it is 02:59:59.7 in Seoul (plus its skew): the
	// tick comes 0.3s later.
	fakeBase := time.Date(2026, 3, 10, 2, 59, 59, 700_000_000, seoul)
	l.now = func() time.Time { return fakeBase.Add(time.Since(start) + time.Duration(a.SkewNs)) }
	fire := sched.Next(fakeBase.Add(-time.Nanosecond))
	late := !l.now().Before(fire)

	ctx, cancel := context.WithDeadline(context.Background(), start.Add(time.Duration(a.RunForNs)))
	defer cancel()
	err = l.RunJob(ctx, Job{Name: a.Job, Schedule: sched, OncePerPeriod: a.OncePerPeriod,
		Run: func(ctx context.Context) error {
			if _, err := db.ExecContext(ctx, "INSERT INTO job_effects (instance) VALUES (?)", a.Instance); err != nil {
				return err
			}
			time.Sleep(150 * time.Millisecond) // the winner holds the lock while the others tick
			return nil
		}})
	return dailyResult{Stats: l.JobStats(a.Job), Late: late}, err
}

func TestDailyJobRunsOncePerPeriodAcrossProcesses(t *testing.T) {
	for _, once := range []bool{true, false} {
		name := map[bool]string{true: "with ledger", false: "control without ledger runs twice"}[once]
		t.Run(name, func(t *testing.T) {
			d := testdb.Migrated(t)
			d.MustExec(t, "CREATE TABLE job_effects (id INT AUTO_INCREMENT PRIMARY KEY, instance VARCHAR(64) NOT NULL)")
			job := lockName(d, "daily-report")
			base := dailyArgs{Job: job, RunForNs: int64(1500 * time.Millisecond), OncePerPeriod: once}
			a, b, late := base, base, base
			a.Instance, b.Instance, late.Instance = "a", "b", "late"
			late.SkewNs = -int64(700 * time.Millisecond) // ticks 0.7s after a and b
			res := runHelpers[dailyResult](t, d, "dailyjob", []any{a, b, late})

			var runs, skipped, done int64
			for i, r := range res {
				if r.Late {
					t.Fatalf("helper %d reached RunJob after its tick (0.3s after the start line)", i)
				}
				if r.Stats.Failed != 0 {
					t.Fatalf("helper %d: %+v", i, r.Stats)
				}
				runs += r.Stats.Runs
				skipped += r.Stats.SkippedHeld + r.Stats.SkippedDone
				done += r.Stats.SkippedDone
			}
			var effects, ledger int
			if err := d.QueryRow("SELECT COUNT(*) FROM job_effects").Scan(&effects); err != nil {
				t.Fatal(err)
			}
			if err := d.QueryRow("SELECT COUNT(*) FROM outbox_job_runs WHERE job = ? AND period_start = ?",
				job, time.Date(2026, 3, 9, 15, 0, 0, 0, time.UTC)).Scan(&ledger); err != nil {
				t.Fatal(err)
			}
			t.Logf("runs %d, effects %d, ledger rows %d, stats %+v", runs, effects, ledger, res)
			if !once {
				if effects < 2 {
					t.Fatalf("without the ledger the late instance should have run the period again: %d effects", effects)
				}
				return
			}
			if effects != 1 || runs != 1 || ledger != 1 || skipped != 2 {
				t.Fatalf("want exactly one run and one ledger row for the period, others skipped: effects %d, runs %d, ledger %d, skipped %d",
					effects, runs, ledger, skipped)
			}
			if res[2].Stats.SkippedDone != 1 || done < 1 {
				t.Fatalf("the late instance must have been stopped by the ledger: %+v", res[2].Stats)
			}
		})
	}
}
