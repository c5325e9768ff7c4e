// Command jobs runs the seed's midnight job that must not run twice: a daily leave accrual,
// started on two instances, as every service with two replicas (or a rolling deploy) does.
//
// The question to ask of any batch job: if two instances run it at once, what is duplicated,
// and can the database prevent it? Here the accrual adds a day to each employee's balance; a
// counter has no natural key for a UNIQUE index to reject a second +1, so the database cannot
// prevent the duplicate. The job therefore runs under mysqllock's job runner: a running flag
// (ticks never overlap in a process), the named lock (one instance at a time) and the run ledger
// (outbox_job_runs: one run per day even when instances take turns).
//
//	go run ./examples/jobs -dsn 'user:pass@tcp(127.0.0.1:3306)/app?parseTime=true'
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/outboxgen/outboxgen/runtime/mysqllock"
	"github.com/outboxgen/outboxgen/runtime/outbox"
)

func main() {
	dsn := flag.String("dsn", os.Getenv("OUTBOX_DSN"), "database DSN with parseTime=true (default $OUTBOX_DSN)")
	flag.Parse()
	if *dsn == "" {
		fmt.Fprintln(os.Stderr, "jobs: no database: pass -dsn or set OUTBOX_DSN")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *dsn, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "jobs:", err)
		os.Exit(1)
	}
}

const employeesTable = `
CREATE TABLE IF NOT EXISTS employees (
    id         BIGINT       NOT NULL PRIMARY KEY,
    name       VARCHAR(191) NOT NULL,
    leave_days INT          NOT NULL DEFAULT 0
) ENGINE = InnoDB`

// run starts two job runners, each on its own connection pool as two processes would be, and
// stops them once the day's accrual is recorded.
func run(ctx context.Context, dsn string, out io.Writer) error {
	out = &syncWriter{w: out} // two instances' jobs and loggers write to it at once
	setup, err := sql.Open("mysql", dsn)
	if err != nil {
		return err
	}
	defer setup.Close()
	if err := outbox.Migrate(ctx, setup); err != nil { // creates outbox_job_runs, the run ledger
		return err
	}
	if _, err := setup.ExecContext(ctx, employeesTable); err != nil {
		return err
	}
	if _, err := setup.ExecContext(ctx, `INSERT INTO employees (id, name) VALUES
		(1, 'Ada'), (2, 'Grace'), (3, 'Edsger'), (4, 'Barbara'), (5, 'Ken')`); err != nil {
		return err
	}

	// In production: mysqllock.Daily(0, 5, time.UTC), five past midnight. The demo cannot wait
	// for midnight, so it runs the same daily schedule in a time zone whose midnight is a few
	// seconds away.
	schedule := mysqllock.Daily(0, 0, zoneWithMidnightIn(3*time.Second))

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	lockers := map[string]*mysqllock.Locker{}
	errs := make(chan error, 2)
	for _, instance := range []string{"instance-a", "instance-b"} {
		db, err := sql.Open("mysql", dsn)
		if err != nil {
			return err
		}
		defer db.Close()
		logger := slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{ReplaceAttr: dropTime})).With("instance", instance)
		locker := mysqllock.New(db, mysqllock.WithInstance(instance), mysqllock.WithLogger(logger))
		lockers[instance] = locker
		job := mysqllock.Job{
			Name:          "leave-accrual",
			Schedule:      schedule,
			OncePerPeriod: true,
			Run: func(ctx context.Context) error {
				return accrue(ctx, db, instance, out)
			},
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- locker.RunJob(runCtx, job)
		}()
	}

	fmt.Fprintf(out, "two instances wait for the daily tick (%s)\n", schedule)
	waited := waitForTheDay(runCtx, setup, lockers)
	cancel() // RunJob returns once no run is in progress
	wg.Wait()
	close(errs)
	for err := range errs {
		waited = errors.Join(waited, err)
	}
	if waited != nil {
		return waited
	}
	for _, instance := range []string{"instance-a", "instance-b"} {
		s := lockers[instance].JobStats("leave-accrual")
		fmt.Fprintf(out, "%s: runs=%d skipped_held=%d skipped_done=%d failed=%d\n",
			instance, s.Runs, s.SkippedHeld, s.SkippedDone, s.Failed)
	}
	var ran, period string
	if err := setup.QueryRowContext(ctx,
		"SELECT instance, DATE_FORMAT(period_start, '%Y-%m-%d %H:%i:%s') FROM outbox_job_runs WHERE job = 'leave-accrual'").Scan(&ran, &period); err != nil {
		return err
	}
	fmt.Fprintf(out, "run ledger: leave-accrual for the day starting %s UTC (midnight in the demo zone), run by %s\n", period, ran)
	return nil
}

// accrue grants one day of leave to every employee. It is slow on purpose (one employee at a
// time), so that without the lock the second instance would overlap it and grant twice.
func accrue(ctx context.Context, db *sql.DB, instance string, out io.Writer) error {
	rows, err := db.QueryContext(ctx, "SELECT id FROM employees ORDER BY id")
	if err != nil {
		return err
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return err
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, id := range ids {
		if _, err := db.ExecContext(ctx, "UPDATE employees SET leave_days = leave_days + 1 WHERE id = ?", id); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx) // the lock was lost, or the process is stopping
		case <-time.After(100 * time.Millisecond):
		}
	}
	_, err = fmt.Fprintf(out, "%s: granted one day of leave to %d employees\n", instance, len(ids))
	return err
}

// waitForTheDay returns once the ledger holds the day's run and both instances have handled
// their tick (run it, or skipped it because the lock was held or the day already recorded).
func waitForTheDay(ctx context.Context, db *sql.DB, lockers map[string]*mysqllock.Locker) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		var recorded int
		if err := db.QueryRowContext(ctx,
			"SELECT COUNT(*) FROM outbox_job_runs WHERE job = 'leave-accrual'").Scan(&recorded); err != nil {
			return err
		}
		ticked := 0
		for _, l := range lockers {
			s := l.JobStats("leave-accrual")
			if s.Failed > 0 {
				return errors.New("the accrual job failed; see the log above")
			}
			if s.Runs+s.SkippedHeld+s.SkippedDone > 0 {
				ticked++
			}
		}
		if recorded > 0 && ticked == len(lockers) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after 30s: %d ledger row(s), %d of %d instances ticked", recorded, ticked, len(lockers))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// zoneWithMidnightIn returns a fixed time zone in which the next midnight is about d from now.
func zoneWithMidnightIn(d time.Duration) *time.Location {
	at := time.Now().UTC().Add(d).Truncate(time.Second)
	sinceMidnight := at.Sub(at.Truncate(24 * time.Hour))
	offset := -int(sinceMidnight / time.Second) // local time at `at` is 00:00:00
	if offset < -12*3600 {
		offset += 24 * 3600
	}
	return time.FixedZone("demo", offset)
}

func dropTime(groups []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey && len(groups) == 0 {
		return slog.Attr{}
	}
	return a
}

// syncWriter serialises writes from several goroutines.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
