package mysqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/outboxgen/outboxgen/runtime/internal/store"
)

// JobRun is one run recorded in the run ledger (outbox_job_runs): a successful run of a Job with
// OncePerPeriod. Jobs without it leave no row. Times come from the database clock, in UTC.
type JobRun struct {
	// Job is the Job's Name.
	Job string
	// PeriodStart is the start of the period the run belongs to (Schedule.PeriodStart).
	PeriodStart time.Time
	// Instance is the WithInstance name of the process that ran it (empty when none was set).
	Instance string
	// StartedAt and FinishedAt bound the run.
	StartedAt, FinishedAt time.Time
}

// LastRuns returns each job's most recent recorded run (the latest period), ordered by job name,
// at most limit of them; limit <= 0 means 100. What an operator reads to see that a job still
// runs: a daily job whose last PeriodStart is two days old has stopped.
func LastRuns(ctx context.Context, db *sql.DB, limit int) ([]JobRun, error) {
	if db == nil {
		return nil, errors.New("mysqllock: LastRuns: nil db")
	}
	rows, err := store.New().JobRunLatest(ctx, db, ledgerLimit(limit))
	if err != nil {
		return nil, fmt.Errorf("mysqllock: LastRuns: %w", err)
	}
	return jobRuns(rows), nil
}

// Runs returns the recorded runs of the job named name, newest period first, at most limit of
// them; limit <= 0 means 100.
func Runs(ctx context.Context, db *sql.DB, name string, limit int) ([]JobRun, error) {
	if db == nil {
		return nil, errors.New("mysqllock: Runs: nil db")
	}
	rows, err := store.New().JobRunListByJob(ctx, db, store.JobRunListByJobParams{Job: name, Limit: ledgerLimit(limit)})
	if err != nil {
		return nil, fmt.Errorf("mysqllock: Runs(%q): %w", name, err)
	}
	return jobRuns(rows), nil
}

func ledgerLimit(limit int) int32 {
	if limit <= 0 {
		return 100
	}
	return int32(min(limit, math.MaxInt32))
}

func jobRuns(rows []store.OutboxJobRun) []JobRun {
	out := make([]JobRun, len(rows))
	for i, r := range rows {
		out[i] = JobRun{Job: r.Job, PeriodStart: r.PeriodStart, Instance: r.Instance, StartedAt: r.StartedAt, FinishedAt: r.FinishedAt}
	}
	return out
}
