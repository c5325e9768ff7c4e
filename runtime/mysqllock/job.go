package mysqllock

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/outboxgen/outboxgen/runtime/incident"
	"github.com/outboxgen/outboxgen/runtime/internal/store"
)

// Job is a scheduled task run by Locker.RunJob on every instance of a service, of which at most
// one runs it at a time. Before writing one, answer the package's question: if two instances ran
// it at once, what would be duplicated, and can the database prevent that instead?
type Job struct {
	// Name identifies the job across instances and versions: the lock is "job:"+Name (through
	// ServerName) and the ledger row is keyed by Name. 1 to 764 bytes (MaxJobName), the width of
	// outbox_job_runs.job; RunJob refuses a longer name at once.
	Name string
	// Schedule says when it runs: Every(d) or Daily(hour, minute, loc).
	Schedule Schedule
	// OncePerPeriod records each successful run in outbox_job_runs under (Name, period start),
	// and skips a period already recorded, so instances taking turns (one tick late, after the
	// other released the lock) do not run the same period twice.
	OncePerPeriod bool
	// Run does the work. Its context is cancelled when RunJob's context is done or the lock is
	// lost (context.Cause wraps ErrLockLost), which the watchdog notices within its interval
	// (WithWatchdog): another instance may hold the lock before then. An error is logged and counted; the next tick runs.
	// A panic is recovered and treated as an error (not recorded in the ledger, the lock
	// released, the next tick runs), and also reported as an incident.JobPanicked.
	Run func(ctx context.Context) error
}

// Schedule says when a job runs and which period a run belongs to. Make one with Every or Daily.
type Schedule struct {
	every  time.Duration
	daily  bool
	hour   int
	minute int
	loc    *time.Location
}

// Every runs the job at each multiple of d (counted from Go's zero time, so every instance
// picks the same instants: Every(time.Hour) fires on the hour). A run's period starts at its
// tick.
func Every(d time.Duration) Schedule { return Schedule{every: d} }

// Daily runs the job once a day at hour:minute in loc (nil means UTC). A run's period is that
// day: it starts at midnight in loc, stored as UTC in outbox_job_runs.period_start. On a day
// when a DST change skips hour:minute, Go's time.Date reads it with the new offset (02:30 on a
// spring-forward day at 02:00 runs at 01:30 old time); a repeated hour:minute runs once, at
// its first occurrence. Every instance computes the same instant, so the lock still works.
func Daily(hour, minute int, loc *time.Location) Schedule {
	if loc == nil {
		loc = time.UTC
	}
	return Schedule{daily: true, hour: hour, minute: minute, loc: loc}
}

func (s Schedule) validate() error {
	switch {
	case s.daily:
		if s.hour < 0 || s.hour > 23 || s.minute < 0 || s.minute > 59 {
			return fmt.Errorf("Daily(%d, %d): hour must be 0..23 and minute 0..59", s.hour, s.minute)
		}
	case s.every < time.Millisecond:
		return fmt.Errorf("schedule: Every(%v) must be at least 1ms (a zero Schedule is not valid)", s.every)
	}
	return nil
}

// Next returns the first tick strictly after t.
func (s Schedule) Next(t time.Time) time.Time {
	if !s.daily {
		return t.Truncate(s.every).Add(s.every)
	}
	lt := t.In(s.loc)
	at := time.Date(lt.Year(), lt.Month(), lt.Day(), s.hour, s.minute, 0, 0, s.loc)
	if !at.After(t) {
		at = time.Date(lt.Year(), lt.Month(), lt.Day()+1, s.hour, s.minute, 0, 0, s.loc)
	}
	return at
}

// PeriodStart returns the start, in UTC and to the microsecond (what DATETIME(6) stores), of the
// period the tick belongs to: the tick itself for Every, the day's midnight in loc for Daily.
func (s Schedule) PeriodStart(tick time.Time) time.Time {
	if !s.daily {
		return tick.Truncate(s.every).UTC().Truncate(time.Microsecond)
	}
	lt := tick.In(s.loc)
	return time.Date(lt.Year(), lt.Month(), lt.Day(), 0, 0, 0, 0, s.loc).UTC()
}

// String describes the schedule for logs.
func (s Schedule) String() string {
	if s.daily {
		return fmt.Sprintf("daily at %02d:%02d %s", s.hour, s.minute, s.loc)
	}
	return fmt.Sprintf("every %v", s.every)
}

// Widths of the run ledger's columns (queries/schema.sql), checked by RunJob before the first
// tick so that a name that does not fit fails at start instead of at every ledger write.
const (
	// MaxJobName is the longest Job.Name in bytes: outbox_job_runs.job is VARBINARY(764).
	MaxJobName = 764
	// MaxInstance is the longest WithInstance name in characters: outbox_job_runs.instance is
	// VARCHAR(191) in utf8mb4.
	MaxInstance = 191
)

// JobStats counts what RunJob did with a job's ticks in this process.
type JobStats struct {
	// Runs counts calls of Job.Run; Failed counts ticks that ended in an error (Run's or its
	// panic, the lock's or the ledger's).
	Runs, Failed int64
	// SkippedRunning counts ticks that arrived while the previous run in this process still went.
	SkippedRunning int64
	// SkippedHeld counts ticks whose lock another instance held.
	SkippedHeld int64
	// SkippedDone counts ticks whose period the ledger already recorded (OncePerPeriod).
	SkippedDone int64
}

type jobState struct {
	running                                         atomic.Bool
	runs, failed, skippedRunning, skippedHeld, done atomic.Int64
}

func (l *Locker) jobState(name string) *jobState {
	l.jobsMu.Lock()
	defer l.jobsMu.Unlock()
	st := l.jobs[name]
	if st == nil {
		st = &jobState{}
		l.jobs[name] = st
	}
	return st
}

// JobStats returns the counts for the job named name (zero if it never ticked here).
func (l *Locker) JobStats(name string) JobStats {
	st := l.jobState(name)
	return JobStats{
		Runs: st.runs.Load(), Failed: st.failed.Load(), SkippedRunning: st.skippedRunning.Load(),
		SkippedHeld: st.skippedHeld.Load(), SkippedDone: st.done.Load(),
	}
}

// RunJob runs j on its schedule until ctx is done, then waits for a run in progress (whose
// context is cancelled) and returns nil. It returns an error at once only for an invalid Job
// (see Job's fields) or an instance name (WithInstance) that the ledger cannot store.
//
// Each tick passes three gates:
//   - The running flag. A tick arriving while this process's previous run of j still goes is
//     skipped, counted in SkippedRunning and logged. RunJob calls for the same name on one
//     Locker share the flag.
//   - The named lock "job:"+j.Name, taken with TryDo. A tick that finds it held elsewhere is
//     skipped and counted in SkippedHeld.
//   - With OncePerPeriod, the ledger, read under the lock. A tick whose period is recorded is
//     skipped and counted in SkippedDone. The period is written under the lock after Run
//     succeeds.
//
// Ticks missed while no instance ran are not made up.
//
// A tick that fails is logged and counted in Failed. Two failures are also reported to the
// Reporter, because a log line alone would let them go unnoticed:
//   - a panic in Run (incident.JobPanicked);
//   - a run that succeeded but could not be recorded in the ledger (incident.JobNotRecorded).
//     Another instance may then run the same period again. When another instance recorded the
//     period meanwhile, the incident is incident.LockLost.
func (l *Locker) RunJob(ctx context.Context, j Job) error {
	if j.Name == "" || len(j.Name) > MaxJobName {
		return fmt.Errorf("mysqllock: job name must be 1..%d bytes (outbox_job_runs.job is VARBINARY(%d)), got %d",
			MaxJobName, MaxJobName, len(j.Name))
	}
	if l.instanceErr != nil {
		return fmt.Errorf("mysqllock: job %q: %w", j.Name, l.instanceErr)
	}
	if j.Run == nil {
		return fmt.Errorf("mysqllock: job %q: nil Run", j.Name)
	}
	if err := j.Schedule.validate(); err != nil {
		return fmt.Errorf("mysqllock: job %q: %w", j.Name, err)
	}
	st := l.jobState(j.Name)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		tick := j.Schedule.Next(l.now())
		timer := time.NewTimer(tick.Sub(l.now()))
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-timer.C:
		}
		if !st.running.CompareAndSwap(false, true) {
			n := st.skippedRunning.Add(1)
			l.logger.WarnContext(ctx, "mysqllock: job tick skipped: the previous run is still going",
				"job", j.Name, "tick", tick, "skipped_running", n)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer st.running.Store(false)
			if err := l.runTick(ctx, j, st, tick); err != nil {
				st.failed.Add(1)
				l.logger.ErrorContext(ctx, "mysqllock: job run failed", "job", j.Name, "tick", tick, "error", err)
			}
		}()
	}
}

// runTick runs one tick of j under its lock.
func (l *Locker) runTick(ctx context.Context, j Job, st *jobState, tick time.Time) error {
	period := j.Schedule.PeriodStart(tick)
	ran, err := l.TryDo(ctx, "job:"+j.Name, func(ctx context.Context) error {
		var started time.Time
		if j.OncePerPeriod {
			r, err := l.q.JobRunCount(ctx, l.db, store.JobRunCountParams{Job: j.Name, PeriodStart: period})
			if err != nil {
				return fmt.Errorf("read the run ledger: %w", err)
			}
			if r.Runs > 0 {
				st.done.Add(1)
				l.logger.InfoContext(ctx, "mysqllock: job skipped: already ran for this period",
					"job", j.Name, "period_start", period)
				return nil
			}
			started = r.Now
		}
		st.runs.Add(1)
		if err := l.callRun(ctx, j); err != nil {
			return err
		}
		if !j.OncePerPeriod {
			return nil
		}
		// The work is done: record it even if ctx was cancelled meanwhile, or the next instance
		// would run the period again.
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.releaseTimeout)
		defer cancel()
		err := l.q.JobRunInsert(wctx, l.db, store.JobRunInsertParams{
			Job: j.Name, PeriodStart: period, Instance: l.instance, StartedAt: started,
		})
		// Neither failure may end as a log line only: the work is done, and the ledger does not
		// say so (or another instance did the same period).
		var me *mysql.MySQLError
		if errors.As(err, &me) && me.Number == 1062 {
			err = fmt.Errorf("%w: job %q ran twice for period %s (another instance recorded it meanwhile)",
				ErrLockLost, j.Name, period.Format(time.RFC3339))
			l.report(ctx, incident.LockLost, ServerName("job:"+j.Name), 0, err)
		} else if err != nil {
			err = fmt.Errorf("mysqllock: job %q ran, but the run ledger could not record period %s (another instance may run the period again): %w",
				j.Name, period.Format(time.RFC3339), err)
			l.reporter.Report(context.WithoutCancel(ctx), incident.Incident{Kind: incident.JobNotRecorded, Subject: j.Name, Err: err})
		}
		return err
	})
	if err != nil {
		return err
	}
	if !ran {
		st.skippedHeld.Add(1)
		l.logger.InfoContext(ctx, "mysqllock: job skipped: another instance holds its lock", "job", j.Name, "tick", tick)
	}
	return nil
}

// callRun calls j.Run, turning a panic into an error so that the tick ends like a failed run:
// the lock is released through the ordinary path, the ledger is not written, and the process
// (this runs in RunJob's tick goroutine, where a panic would end it) goes on to the next tick.
func (l *Locker) callRun(ctx context.Context, j Job) (err error) {
	defer func() {
		if p := recover(); p != nil {
			var cause error
			if pe, ok := p.(error); ok {
				cause = fmt.Errorf("mysqllock: job %q panicked: %w\n%s", j.Name, pe, debug.Stack())
			} else {
				cause = fmt.Errorf("mysqllock: job %q panicked: %v\n%s", j.Name, p, debug.Stack())
			}
			l.reporter.Report(context.WithoutCancel(ctx), incident.Incident{Kind: incident.JobPanicked, Subject: j.Name, Err: cause})
			err = cause
		}
	}()
	return j.Run(ctx)
}
