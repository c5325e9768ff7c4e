package mysqllock

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/internal/testdb"
	"github.com/outboxgen/outboxgen/internal/testutil"
)

// Helper processes: the test binary re-executes itself with these variables set, and
// TestMain runs the selected mode instead of the tests.
const (
	envMode  = "MYSQLLOCK_HELPER"
	envDSN   = "MYSQLLOCK_HELPER_DSN"
	envArgs  = "MYSQLLOCK_HELPER_ARGS" // JSON, mode-specific
	resultOK = "HELPER-RESULT: "
)

// TestMain runs the tests, or, in a helper process that a cross-process test started, the
// helper's mode (a helper is not a test, so it must not show up as a skipped one).
func TestMain(m *testing.M) {
	if mode := os.Getenv(envMode); mode != "" {
		helperMain(mode)
	}
	os.Exit(m.Run())
}

func helperMain(mode string) {
	db, err := sql.Open("mysql", os.Getenv(envDSN))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	defer db.Close()
	var out any
	switch mode {
	case "counter":
		var a counterArgs
		mustJSON(os.Getenv(envArgs), &a)
		out, err = helperCounter(db, a)
	case "dailyjob":
		var a dailyArgs
		mustJSON(os.Getenv(envArgs), &a)
		out, err = helperDailyJob(db, a)
	default:
		err = fmt.Errorf("unknown helper mode %q", mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(3)
	}
	b, _ := json.Marshal(out) // plain structs of ints and bools always marshal.
	fmt.Println(resultOK + string(b))
	os.Exit(0)
}

func mustJSON(s string, v any) {
	if err := json.Unmarshal([]byte(s), v); err != nil {
		fmt.Fprintln(os.Stderr, "helper args:", err)
		os.Exit(3)
	}
}

// The start line: process start-up on a busy machine takes anything from milliseconds to
// seconds, so helpers check in (helper_ready) and then wait at a row lock: the parent inserts
// the row helper_start in a transaction it keeps open until all of them have checked in, and
// its commit lets every waiting locking read through at once.
const gateDDL1 = "CREATE TABLE helper_ready (id INT AUTO_INCREMENT PRIMARY KEY)"
const gateDDL2 = "CREATE TABLE helper_start (id INT PRIMARY KEY)"

// awaitStart is the helper's side of the start line: it returns when the parent opens it, with
// the time it did.
func awaitStart(db *sql.DB) (time.Time, error) {
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		return time.Time{}, err
	}
	defer conn.Close()
	// The parent waits up to 2 minutes for every helper to check in.
	if _, err := conn.ExecContext(ctx, "SET SESSION innodb_lock_wait_timeout = 150"); err != nil {
		return time.Time{}, err
	}
	if _, err := conn.ExecContext(ctx, "INSERT INTO helper_ready () VALUES ()"); err != nil {
		return time.Time{}, err
	}
	var id int
	if err := conn.QueryRowContext(ctx, "SELECT id FROM helper_start WHERE id = 1 LOCK IN SHARE MODE").Scan(&id); err != nil {
		return time.Time{}, fmt.Errorf("wait at the start line: %w", err)
	}
	return time.Now(), nil
}

// runHelpers starts one helper process in mode per element of args, releases them together
// through the start line, and returns their decoded results.
func runHelpers[R any](t *testing.T, d *testdb.DB, mode string, args []any) []R {
	t.Helper()
	d.MustExec(t, gateDDL1)
	d.MustExec(t, gateDDL2)
	gate, err := d.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer gate.Rollback() //nolint:errcheck // committed below; Rollback after Commit is ErrTxDone
	if _, err := gate.Exec("INSERT INTO helper_start VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	dsn := d.DSN
	type proc struct {
		cmd *exec.Cmd
		out strings.Builder
		err strings.Builder
	}
	procs := make([]*proc, len(args))
	for i, a := range args {
		b, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		p := &proc{cmd: exec.Command(os.Args[0], "-test.run=^$", "-test.count=1")}
		p.cmd.Env = append(os.Environ(), envMode+"="+mode, envDSN+"="+dsn, envArgs+"="+string(b))
		p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.err
		if err := p.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs[i] = p
	}
	testutil.Eventually(t, 2*time.Minute, fmt.Sprintf("all %d helpers to check in", len(procs)), func() bool {
		var n int
		if err := d.QueryRow("SELECT COUNT(*) FROM helper_ready").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == len(procs)
	})
	if err := gate.Commit(); err != nil {
		t.Fatal(err)
	}
	results := make([]R, len(procs))
	for i, p := range procs {
		err := p.cmd.Wait()
		if err != nil {
			t.Fatalf("helper %d (%s): %v\nstdout: %s\nstderr: %s", i, mode, err, p.out.String(), p.err.String())
		}
		_, line, ok := strings.Cut(p.out.String(), resultOK)
		if !ok {
			t.Fatalf("helper %d printed no result:\n%s\n%s", i, p.out.String(), p.err.String())
		}
		line, _, _ = strings.Cut(line, "\n")
		if err := json.Unmarshal([]byte(line), &results[i]); err != nil {
			t.Fatalf("helper %d result %q: %v", i, line, err)
		}
	}
	return results
}

// The shared counter: a read-sleep-write critical section that loses updates when two run at
// once, plus a gauge of how many run at once (active) and its maximum.
const counterDDL = `CREATE TABLE counter (
	id INT PRIMARY KEY, n INT NOT NULL, active INT NOT NULL, max_active INT NOT NULL)`

type counterArgs struct {
	LockName   string
	Iterations int
	NoLock     bool // the control: the same section without the lock
	UseTryDo   bool // TryDo in a retry loop instead of Do
	Gate       bool // wait at the start line (helper processes)
}

type counterResult struct{ Done int }

// increment is the critical section. MariaDB evaluates single-table UPDATE assignments left to
// right, so max_active sees the incremented active.
func increment(ctx context.Context, db *sql.DB) error {
	if _, err := db.ExecContext(ctx, "UPDATE counter SET active = active + 1, max_active = GREATEST(max_active, active) WHERE id = 1"); err != nil {
		return err
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT n FROM counter WHERE id = 1").Scan(&n); err != nil {
		return err
	}
	time.Sleep(3 * time.Millisecond) // widen the window a concurrent run would fall into
	if _, err := db.ExecContext(ctx, "UPDATE counter SET n = ? WHERE id = 1", n+1); err != nil {
		return err
	}
	_, err := db.ExecContext(ctx, "UPDATE counter SET active = active - 1 WHERE id = 1")
	return err
}

// helperCounter runs a.Iterations increments on db, each under the lock a.LockName (or not).
func helperCounter(db *sql.DB, a counterArgs) (counterResult, error) {
	ctx := context.Background()
	if a.Gate {
		if _, err := awaitStart(db); err != nil {
			return counterResult{}, err
		}
	}
	l := New(db, WithWatchdog(100*time.Millisecond))
	section := func(ctx context.Context) error { return increment(ctx, db) }
	for i := 0; i < a.Iterations; i++ {
		switch {
		case a.NoLock:
			if err := section(ctx); err != nil {
				return counterResult{}, err
			}
		case a.UseTryDo:
			for {
				ran, err := l.TryDo(ctx, a.LockName, section)
				if err != nil {
					return counterResult{}, err
				}
				if ran {
					break
				}
			}
		default:
			ran, err := l.Do(ctx, a.LockName, 30*time.Second, section)
			if err != nil {
				return counterResult{}, err
			}
			if !ran {
				return counterResult{}, fmt.Errorf("iteration %d: Do waited 30s without the lock", i)
			}
		}
	}
	return counterResult{Done: a.Iterations}, nil
}

func readCounter(t *testing.T, d *testdb.DB) (n, maxActive int) {
	t.Helper()
	if err := d.QueryRow("SELECT n, max_active FROM counter WHERE id = 1").Scan(&n, &maxActive); err != nil {
		t.Fatal(err)
	}
	return n, maxActive
}

// Serialisation: several instances, each its own *sql.DB pool (and, below, its own process),
// increment the counter under the lock: the count is exact and at most one runs at a time. The
// control runs the same thing without the lock and must see the overlap, which proves the test
// can fail.
func TestSerialisesAcrossPools(t *testing.T) {
	t.Parallel()
	for _, noLock := range []bool{false, true} {
		name := map[bool]string{false: "locked", true: "control without lock must overlap"}[noLock]
		t.Run(name, func(t *testing.T) {
			d := testdb.New(t)
			d.MustExec(t, counterDDL)
			d.MustExec(t, "INSERT INTO counter VALUES (1, 0, 0, 0)")
			const workers, iterations = 4, 15
			var wg sync.WaitGroup
			errs := make(chan error, workers)
			start := make(chan struct{})
			for w := 0; w < workers; w++ {
				db := d.Open(t) // a pool per instance
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					_, err := helperCounter(db, counterArgs{LockName: lockName(d, "counter"), Iterations: iterations, NoLock: noLock, UseTryDo: w%2 == 1})
					errs <- err
				}()
			}
			close(start)
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			checkCounter(t, d, workers*iterations, noLock)
		})
	}
}

func TestSerialisesAcrossProcesses(t *testing.T) {
	for _, noLock := range []bool{false, true} {
		name := map[bool]string{false: "locked", true: "control without lock must overlap"}[noLock]
		t.Run(name, func(t *testing.T) {
			d := testdb.New(t)
			d.MustExec(t, counterDDL)
			d.MustExec(t, "INSERT INTO counter VALUES (1, 0, 0, 0)")
			const procs, iterations = 3, 15
			args := make([]any, procs)
			for i := range args {
				args[i] = counterArgs{LockName: lockName(d, "counter"), Iterations: iterations, NoLock: noLock, UseTryDo: i == 0, Gate: true}
			}
			for i, r := range runHelpers[counterResult](t, d, "counter", args) {
				if r.Done != iterations {
					t.Fatalf("helper %d did %d iterations, want %d", i, r.Done, iterations)
				}
			}
			checkCounter(t, d, procs*iterations, noLock)
		})
	}
}

func checkCounter(t *testing.T, d *testdb.DB, want int, noLock bool) {
	t.Helper()
	n, maxActive := readCounter(t, d)
	t.Logf("count %d of %d, max concurrency %d", n, want, maxActive)
	if noLock {
		if maxActive < 2 {
			t.Fatalf("without the lock the sections never overlapped (max concurrency %d): this test could not detect a broken lock", maxActive)
		}
		return
	}
	if n != want || maxActive != 1 {
		t.Fatalf("under the lock: count %d (want %d), max concurrency %d (want 1)", n, want, maxActive)
	}
}
