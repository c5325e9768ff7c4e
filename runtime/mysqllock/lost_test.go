package mysqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/internal/testdb"
	"github.com/outboxgen/outboxgen/internal/testutil"
	"github.com/outboxgen/outboxgen/runtime/incident"
)

// Lost lock: the holder's session is KILLed while fn runs. The watchdog cancels fn's context
// (cause ErrLockLost), lock_lost is reported once, TryDo returns ErrLockLost with fn's error,
// and the next TryDo from another instance gets the lock: the cron is not dead.
func TestWatchdogCancelsWhenSessionKilled(t *testing.T) {
	t.Parallel()
	d := testdb.New(t)
	ln := lockName(d, "nightly")
	rec := &recorder{}
	l := New(d.Open(t), WithReporter(rec), WithWatchdog(50*time.Millisecond))
	holding := make(chan struct{})
	type res struct {
		ran        bool
		err, cause error
		waited     time.Duration
	}
	out := make(chan res, 1)
	go func() {
		var cause error
		var waited time.Duration
		ran, err := l.TryDo(context.Background(), ln, func(ctx context.Context) error {
			close(holding)
			start := time.Now()
			select {
			case <-ctx.Done():
				waited = time.Since(start)
				cause = context.Cause(ctx)
				return fmt.Errorf("stopped half-way: %w", ctx.Err())
			case <-time.After(10 * time.Second):
				return errors.New("the watchdog never cancelled fn")
			}
		})
		out <- res{ran, err, cause, waited}
	}()
	<-holding
	id := holder(t, d.DB, ln)
	if id == 0 {
		t.Fatal("nobody holds the lock while fn runs")
	}
	killedAt := time.Now()
	d.MustExec(t, fmt.Sprintf("KILL %d", id))
	r := <-out
	t.Logf("fn cancelled %v after the KILL", time.Since(killedAt))
	if !r.ran || !errors.Is(r.err, ErrLockLost) || !errors.Is(r.err, context.Canceled) {
		t.Fatalf("ran=%v err=%v: want ErrLockLost joined with fn's own error", r.ran, r.err)
	}
	if !errors.Is(r.cause, ErrLockLost) {
		t.Fatalf("context.Cause = %v, want ErrLockLost", r.cause)
	}
	lost := rec.of(incident.LockLost)
	if len(lost) != 1 || len(rec.all()) != 1 {
		t.Fatalf("incidents %q, want exactly one lock_lost", rec.kinds())
	}
	if lost[0].ConnID != id || lost[0].Subject != ln {
		t.Fatalf("incident %+v, want connection %d", lost[0], id)
	}
	other := New(d.Open(t))
	ran, err := other.TryDo(context.Background(), ln, func(context.Context) error { return nil })
	if !ran || err != nil {
		t.Fatalf("another instance after the loss: ran=%v err=%v, want the lock", ran, err)
	}
}

// The session stays alive but stops holding the lock behind the code's back: the watchdog sees
// IS_USED_LOCK naming nobody and cancels.
func TestWatchdogCancelsWhenLockReleasedBehindItsBack(t *testing.T) {
	t.Parallel()
	d := testdb.New(t)
	ln := lockName(d, "sneaky")
	db := d.Open(t)
	rec := &recorder{}
	// The first check comes 200ms in: by then this test's own statement on the lock's connection
	// is long finished (a *sql.Conn must not run two statements at once).
	l := New(db, WithReporter(rec), WithWatchdog(200*time.Millisecond))
	conns := withSeam(l, db, func(c *sql.Conn) lockConn { return c })
	ran, err := l.TryDo(context.Background(), ln, func(ctx context.Context) error {
		var n sql.NullInt64
		if err := (*conns)[0].QueryRowContext(context.WithoutCancel(ctx), "SELECT RELEASE_ALL_LOCKS()").Scan(&n); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil // stopped as asked
		case <-time.After(10 * time.Second):
			return errors.New("the watchdog never cancelled fn")
		}
	})
	if !ran || !errors.Is(err, ErrLockLost) {
		t.Fatalf("ran=%v err=%v, want ErrLockLost", ran, err)
	}
	if rec.kinds() != "lock_lost" {
		t.Fatalf("incidents %q, want exactly one lock_lost", rec.kinds())
	}
}

// The seed's second use: "create a user with this email" when soft deletes forbid a UNIQUE index
// on email. Concurrent sign-ups are serialised by Do on a per-email lock: exactly one active user
// per email. The control without the lock shows duplicates, so the test can fail.
func TestSoftDeleteUniqueEmail(t *testing.T) {
	t.Parallel()
	for _, noLock := range []bool{false, true} {
		name := map[bool]string{false: "locked", true: "control without lock duplicates"}[noLock]
		t.Run(name, func(t *testing.T) {
			d := testdb.New(t)
			d.MustExec(t, `CREATE TABLE users (
				id BIGINT AUTO_INCREMENT PRIMARY KEY,
				email VARCHAR(191) NOT NULL,
				deleted_at DATETIME(6) NULL,
				KEY users_email (email))`)
			emails := []string{"Kim@Example.com", "lee@example.com", "park@example.com", "choi@example.com"}
			// Soft-deleted accounts do not block a new sign-up: this is why no UNIQUE(email) fits.
			d.MustExec(t, "INSERT INTO users (email, deleted_at) VALUES (?, UTC_TIMESTAMP(6)), (?, UTC_TIMESTAMP(6))", emails[0], emails[1])

			db := d.Open(t)
			l := New(db, WithWatchdog(100*time.Millisecond))
			errExists := errors.New("email already in use")
			create := func(ctx context.Context, email string) error {
				var n int
				if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM users WHERE email = ? AND deleted_at IS NULL", email).Scan(&n); err != nil {
					return err
				}
				if n > 0 {
					return errExists
				}
				time.Sleep(2 * time.Millisecond) // the gap between the check and the insert
				_, err := db.ExecContext(ctx, "INSERT INTO users (email) VALUES (?)", email)
				return err
			}
			const signups = 6 // concurrent attempts per email
			var wg sync.WaitGroup
			var mu sync.Mutex
			created := map[string]int{}
			errs := make(chan error, signups*len(emails))
			start := make(chan struct{})
			for i := 0; i < signups; i++ {
				for _, e := range emails {
					wg.Add(1)
					go func() {
						defer wg.Done()
						<-start
						var err error
						if noLock {
							err = create(context.Background(), e)
						} else {
							var ran bool
							ran, err = l.Do(context.Background(), lockName(d, "user-email:"+e), 10*time.Second, func(ctx context.Context) error { return create(ctx, e) })
							if err == nil && !ran {
								err = fmt.Errorf("%s: lock not acquired in 10s", e)
							}
						}
						switch {
						case err == nil:
							mu.Lock()
							created[e]++
							mu.Unlock()
						case !errors.Is(err, errExists):
							errs <- err
						}
					}()
				}
			}
			close(start)
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			dup := 0
			for _, e := range emails {
				var active int
				if err := d.QueryRow("SELECT COUNT(*) FROM users WHERE email = ? AND deleted_at IS NULL", e).Scan(&active); err != nil {
					t.Fatal(err)
				}
				if active > 1 {
					dup++
				}
				if !noLock && (active != 1 || created[e] != 1) {
					t.Errorf("%s: %d active users, %d sign-ups succeeded; want exactly 1", e, active, created[e])
				}
			}
			t.Logf("emails with duplicate active users: %d of %d", dup, len(emails))
			if noLock && dup == 0 {
				t.Fatal("without the lock no duplicate appeared: this test could not detect a missing lock")
			}
		})
	}
}

// A panicking critical section still releases its lock (else the lock would stay on a
// connection nobody closes), and the panic goes on to the caller.
func TestPanicReleasesLock(t *testing.T) {
	t.Parallel()
	d := testdb.New(t)
	ln := lockName(d, "panics")
	db := d.Open(t)
	rec := &recorder{}
	l := New(db, WithReporter(rec), WithWatchdog(20*time.Millisecond))
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Fatalf("recovered %v, want the critical section's panic", r)
			}
		}()
		_, _ = l.TryDo(context.Background(), ln, func(context.Context) error { panic("boom") })
		t.Fatal("TryDo returned although fn panicked")
	}()
	if h := holder(t, d.DB, ln); h != 0 {
		t.Fatalf("lock still held by %d after a panic", h)
	}
	if s := db.Stats(); s.InUse != 0 || len(rec.all()) != 0 {
		t.Fatalf("pool %+v, incidents %q: want the connection back and no incident", s, rec.kinds())
	}
}

// Cancelling the caller's context while Do waits abandons the wait: an error, no incident (it
// is the caller's own cancellation), and the waiting session is gone rather than queued.
func TestDoWaitCancelled(t *testing.T) {
	t.Parallel()
	d := testdb.New(t)
	ln := lockName(d, "busy")
	rec := &recorder{}
	holderL := New(d.Open(t), WithWatchdog(0))
	wdb := d.Open(t)
	waiter := New(wdb, WithReporter(rec))
	defer holdLock(t, holderL, ln)()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	ran, err := waiter.Do(ctx, ln, 30*time.Second, func(context.Context) error {
		t.Error("fn ran without the lock")
		return nil
	})
	if ran || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ran=%v err=%v, want the context's deadline error", ran, err)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Fatalf("Do returned %v after the cancellation, want promptly", waited)
	}
	if len(rec.all()) != 0 {
		t.Fatalf("incidents %q: the caller's own cancellation is not one", rec.kinds())
	}
	if s := wdb.Stats(); s.OpenConnections != 0 {
		t.Fatalf("waiter pool %+v: the interrupted connection must be discarded", s)
	}
	// Nobody is left waiting in GET_LOCK on the server.
	testutil.Eventually(t, 5*time.Second, "no GET_LOCK wait left queued on the server", func() bool {
		return len(lockWaiters(t, d)) == 0
	})
}
