package mysqllock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/go-sql-driver/mysql"

	"github.com/outboxgen/outboxgen/internal/faultdriver"
	"github.com/outboxgen/outboxgen/internal/testdb"
	"github.com/outboxgen/outboxgen/internal/testutil"
	"github.com/outboxgen/outboxgen/runtime/incident"
)

var quiet = slog.New(slog.DiscardHandler)

// runJobUntil runs j with l in the background until done reports true, then stops RunJob and
// waits for it. It fails the test if done is not reached in 10s.
func runJobUntil(t *testing.T, l *Locker, j Job, done func() bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	res := make(chan error, 1)
	go func() { res <- l.RunJob(ctx, j) }()
	defer func() {
		cancel()
		if t.Failed() {
			t.Logf("job %q: stats %+v", j.Name, l.JobStats(j.Name))
		}
	}()
	testutil.Eventually(t, 10*time.Second, fmt.Sprintf("job %q to be done", j.Name), func() bool {
		select {
		case err := <-res:
			t.Fatalf("RunJob returned %v before the test was done", err)
		default:
		}
		return done()
	})
	cancel()
	if err := <-res; err != nil {
		t.Fatalf("RunJob: %v", err)
	}
}

func ledgerRows(t *testing.T, d *testdb.DB, job string) int {
	t.Helper()
	var n int
	if err := d.QueryRow("SELECT COUNT(*) FROM outbox_job_runs WHERE job = ?", job).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A panicking Run must not end the process (it runs in RunJob's own goroutine, where nobody else
// could recover it): the panic becomes a failed run, reported as an incident with the job's name
// and the panic value, not recorded in the ledger, the lock released, and the next tick runs.
func TestJobPanicIsRecoveredAndReported(t *testing.T) {
	t.Parallel()
	d := testdb.Migrated(t)
	db := d.Open(t)
	rec := &recorder{}
	l := New(db, WithReporter(rec), WithLogger(quiet), WithWatchdog(20*time.Millisecond))
	name := lockName(d, "panics")
	var calls, succeeded atomic.Int64
	j := Job{Name: name, Schedule: Every(50 * time.Millisecond), OncePerPeriod: true,
		Run: func(context.Context) error {
			if calls.Add(1) == 1 {
				panic("boom: the first run panics")
			}
			succeeded.Add(1)
			return nil
		}}
	// Stop once a run after the panic has been recorded in the ledger.
	runJobUntil(t, l, j, func() bool { return succeeded.Load() >= 1 && ledgerRows(t, d, name) >= 1 })

	st := l.JobStats(name)
	t.Logf("stats %+v, incidents %q", st, rec.kinds())
	if rec.kinds() != string(incident.JobPanicked) {
		t.Fatalf("incidents %q, want exactly one %s", rec.kinds(), incident.JobPanicked)
	}
	in := rec.all()[0]
	if in.Subject != name || in.Err == nil || !strings.Contains(in.Err.Error(), "boom: the first run panics") ||
		!strings.Contains(in.Err.Error(), name) {
		t.Fatalf("incident %+v, want the job's name as Subject and the panic value in Err", in)
	}
	if st.Failed < 1 || st.Runs != calls.Load() {
		t.Fatalf("stats %+v after %d calls: the panicked run must count as failed", st, calls.Load())
	}
	// Every successful run is in the ledger, the panicked one is not.
	if n := ledgerRows(t, d, name); int64(n) != succeeded.Load() {
		t.Fatalf("%d ledger rows for %d successful runs: the panicked run must not be recorded", n, succeeded.Load())
	}
	if h := holder(t, d.DB, ServerName("job:"+name)); h != 0 {
		t.Fatalf("the job's lock is still held by connection %d", h)
	}
	if s := db.Stats(); s.InUse != 0 {
		t.Fatalf("pool %+v: a connection was not given back", s)
	}
}

// A run that succeeded but could not be written to the ledger is an incident, not only a log
// line: another instance may run the period again (job_not_recorded), or, when the period was
// recorded meanwhile by someone else, already did (lock_lost, the job's lock as Subject).
func TestJobLedgerWriteFailureIsReported(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		err      error
		kind     incident.Kind
		lockName bool  // Subject is the job's server lock name, not the job's Name
		is       error // the reported error wraps this
	}{
		{"write fails", errors.New("injected: ledger write failed"), incident.JobNotRecorded, false, nil},
		{"period recorded by another instance", &mysql.MySQLError{Number: 1062, Message: "injected: Duplicate entry"}, incident.LockLost, true, ErrLockLost},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			d := testdb.Migrated(t)
			inj, db := d.OpenFaulty(t)
			inj.Add(faultdriver.Rule{Match: `INSERT INTO outbox_job_runs`, Err: c.err, Times: 1})
			rec := &recorder{}
			l := New(db, WithReporter(rec), WithLogger(quiet), WithWatchdog(0))
			name := lockName(d, "ledger-fails")
			var calls atomic.Int64
			j := Job{Name: name, Schedule: Every(50 * time.Millisecond), OncePerPeriod: true,
				Run: func(context.Context) error { calls.Add(1); return nil }}
			runJobUntil(t, l, j, func() bool { return ledgerRows(t, d, name) >= 1 })

			st := l.JobStats(name)
			t.Logf("stats %+v, incidents %q", st, rec.kinds())
			if rec.kinds() != string(c.kind) {
				t.Fatalf("incidents %q, want exactly one %s", rec.kinds(), c.kind)
			}
			in, subject, is := rec.all()[0], name, c.is
			if c.lockName {
				subject = ServerName("job:" + name)
			}
			if is == nil {
				is = c.err
			}
			if in.Subject != subject || !errors.Is(in.Err, is) || !strings.Contains(in.Err.Error(), name) {
				t.Fatalf("incident %+v, want Subject %q and an error naming the job and wrapping %v", in, subject, is)
			}
			if st.Failed < 1 {
				t.Fatalf("stats %+v: the unrecorded run must count as failed", st)
			}
			if n := ledgerRows(t, d, name); int64(n) != calls.Load()-1 {
				t.Fatalf("%d ledger rows for %d runs, one of whose writes failed", n, calls.Load())
			}
		})
	}
}

// The ledger's columns bound the names: a job name longer than outbox_job_runs.job and an
// instance name longer than outbox_job_runs.instance (or not UTF-8) fail RunJob at once with
// an error saying what to change, instead of making every ledger write fail. Names that fill
// the columns exactly are stored whole.
func TestJobAndInstanceNameLimits(t *testing.T) {
	t.Parallel()
	d := testdb.Migrated(t)
	ok := func(context.Context) error { return nil }
	sched := Every(20 * time.Millisecond)

	for _, c := range []struct {
		name     string
		job      string
		instance string
		want     string
	}{
		{"job name over the column", strings.Repeat("j", MaxJobName+1), "", "outbox_job_runs.job"},
		{"instance over the column", "x", strings.Repeat("é", MaxInstance+1), "WithInstance"},
		{"instance not UTF-8", "x", "host-\xff", "WithInstance"},
	} {
		t.Run(c.name, func(t *testing.T) {
			opts := []Option{WithLogger(quiet), WithReporter(&recorder{})}
			if c.instance != "" {
				opts = append(opts, WithInstance(c.instance))
			}
			l := New(d.DB, opts...)
			done := make(chan error, 1)
			go func() {
				done <- l.RunJob(context.Background(), Job{Name: c.job, Schedule: sched, OncePerPeriod: true, Run: ok})
			}()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("RunJob = %v, want an error naming %s", err, c.want)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("RunJob did not return: it accepted a name the ledger cannot store")
			}
		})
	}

	t.Run("names that fill the columns are stored whole", func(t *testing.T) {
		rec := &recorder{}
		instance := strings.Repeat("😀", MaxInstance) // 191 characters, 764 bytes
		job := lockName(d, "")
		job += strings.Repeat("j", MaxJobName-len(job))
		l := New(d.DB, WithInstance(instance), WithReporter(rec), WithLogger(quiet))
		// The stats as the first run is recorded: a later tick cut off by runJobUntil's own
		// cancellation (the ledger read fails with "context canceled") counts as failed.
		var st JobStats
		runJobUntil(t, l, Job{Name: job, Schedule: sched, OncePerPeriod: true, Run: ok},
			func() bool {
				st = l.JobStats(job)
				return ledgerRows(t, d, job) >= 1
			})
		var gotJob []byte
		var gotInstance string
		if err := d.QueryRow("SELECT job, instance FROM outbox_job_runs WHERE job = ? LIMIT 1", job).Scan(&gotJob, &gotInstance); err != nil {
			t.Fatal(err)
		}
		if string(gotJob) != job || gotInstance != instance {
			t.Fatalf("ledger row has job of %d bytes and instance %q, want them unchanged", len(gotJob), gotInstance)
		}
		if st.Failed != 0 || len(rec.all()) != 0 {
			t.Fatalf("stats %+v, incidents %q", st, rec.kinds())
		}
	})
}

// The default instance name is "<host>:<pid>", cut on a character boundary to fit the column
// and keeping the pid.
func TestDefaultInstanceFits(t *testing.T) {
	t.Parallel()
	for _, host := range []string{"web-1", strings.Repeat("h", 300), strings.Repeat("é", 300), "bad-\xff-host"} {
		got := defaultInstance(host, 12345)
		if !utf8.ValidString(got) || utf8.RuneCountInString(got) > MaxInstance || !strings.HasSuffix(got, ":12345") {
			t.Errorf("defaultInstance(%.20q...) = %q (%d characters): want valid UTF-8 of at most %d ending in :12345",
				host, got, utf8.RuneCountInString(got), MaxInstance)
		}
	}
	if got := defaultInstance("web-1", 7); got != "web-1:7" {
		t.Errorf("defaultInstance(web-1, 7) = %q, want web-1:7", got)
	}
	if New(nil).instanceErr != nil {
		t.Error("the default instance name was refused")
	}
}
