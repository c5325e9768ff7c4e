package mysqllock

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/outboxgen/outboxgen/internal/testutil"

	"github.com/outboxgen/outboxgen/internal/faultdriver"
	"github.com/outboxgen/outboxgen/internal/testdb"
	"github.com/outboxgen/outboxgen/runtime/incident"
)

// faultDB opens a pool on a fresh database through the fault driver.
func faultDB(t *testing.T) (*testdb.DB, *faultdriver.Injector, *sql.DB) {
	t.Helper()
	d := testdb.New(t)
	inj, db := d.OpenFaulty(t)
	return d, inj, db
}

// fnResults are the two critical-section outcomes every cleanup path is checked with: cleanup
// must never hide fn's error, and must not invent one when fn succeeded.
var fnResults = []struct {
	name string
	err  error
}{{"fn ok", nil}, {"fn fails", errFn}}

func checkFnErr(t *testing.T, err, fnErr error) {
	t.Helper()
	if fnErr != nil && !errors.Is(err, fnErr) {
		t.Fatalf("the critical section's error is hidden: got %v", err)
	}
}

// RELEASE_LOCK's query fails -> the connection is destroyed (the server ends the session and
// frees the lock) and release_failed is reported; fn's error survives.
func TestReleaseQueryFailsDestroysConnection(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		err   error
		fnErr error
	}{
		{"fn ok", errors.New("injected: release query failed"), nil},
		{"fn fails", errors.New("injected: release query failed"), errFn},
		// database/sql closes the Conn itself after driver.ErrBadConn; destroy must see that
		// as done, not as a failed destroy.
		{"bad conn/fn fails", driver.ErrBadConn, errFn},
	} {
		fr := struct {
			name string
			err  error
		}{c.name, c.fnErr}
		t.Run(fr.name, func(t *testing.T) {
			d, inj, db := faultDB(t)
			ln := lockName(d, "job:release-fails")
			rec := &recorder{}
			l := New(db, WithReporter(rec), WithWatchdog(0))
			rule := inj.Fail(`RELEASE_LOCK`, c.err)

			var heldBy int64
			ran, err := l.TryDo(context.Background(), ln, func(ctx context.Context) error {
				heldBy = holder(t, d.DB, ln)
				return fr.err
			})
			if !ran {
				t.Fatalf("ran = false (err %v)", err)
			}
			if rule.Hits() != 1 {
				t.Fatalf("the RELEASE_LOCK fault fired %d times, want 1", rule.Hits())
			}
			if fr.err == nil && err != nil {
				t.Fatalf("a repaired release failure must be reported, not returned: got %v", err)
			}
			checkFnErr(t, err, fr.err)
			if errors.Is(err, ErrLockLost) {
				t.Fatalf("a failed release is not a lost lock: %v", err)
			}
			got := rec.of(incident.ReleaseFailed)
			if len(got) != 1 || rec.kinds() != "release_failed" {
				t.Fatalf("incidents %q, want exactly one release_failed", rec.kinds())
			}
			if got[0].Subject != ln || got[0].ConnID != heldBy || got[0].Err == nil {
				t.Fatalf("incident %+v: want subject, the holder's connection id %d and the cause", got[0], heldBy)
			}
			// The server's view: the session is gone and the lock free for anyone.
			waitGone(t, d.DB, heldBy)
			waitFree(t, d.DB, ln)
			if s := db.Stats(); s.OpenConnections != 0 || s.InUse != 0 {
				t.Fatalf("pool after destroy: %+v, want no connection kept", s)
			}
			rule.Remove()
			ran, err = New(d.Open(t)).TryDo(context.Background(), ln, func(context.Context) error { return nil })
			if !ran || err != nil {
				t.Fatalf("another instance must get the lock: ran=%v err=%v", ran, err)
			}
		})
	}
}

// Giving the connection back fails (the seam: database/sql never reports it) -> destroyed,
// return_failed reported, fn's error survives.
func TestReturnFailsDestroysConnection(t *testing.T) {
	t.Parallel()
	for _, fr := range fnResults {
		t.Run(fr.name, func(t *testing.T) {
			d := testdb.New(t)
			ln := lockName(d, "return-fails")
			db := d.Open(t)
			rec := &recorder{}
			l := New(db, WithReporter(rec), WithWatchdog(0))
			withSeam(l, db, func(c *sql.Conn) lockConn {
				return &seamConn{Conn: c, closeErr: errors.New("injected: pool refused the connection")}
			})
			var heldBy int64
			ran, err := l.TryDo(context.Background(), ln, func(context.Context) error {
				heldBy = holder(t, d.DB, ln)
				return fr.err
			})
			if !ran {
				t.Fatalf("ran = false (err %v)", err)
			}
			if fr.err == nil && err != nil {
				t.Fatalf("a repaired return failure must be reported, not returned: got %v", err)
			}
			checkFnErr(t, err, fr.err)
			got := rec.of(incident.ReturnFailed)
			if len(got) != 1 || rec.kinds() != "return_failed" {
				t.Fatalf("incidents %q, want exactly one return_failed", rec.kinds())
			}
			if got[0].ConnID != heldBy || got[0].Subject != ln {
				t.Fatalf("incident %+v: want connection %d", got[0], heldBy)
			}
			waitGone(t, d.DB, heldBy)
			if s := db.Stats(); s.OpenConnections != 0 {
				t.Fatalf("pool after destroy: %+v, want the connection discarded", s)
			}
		})
	}
}

// Destroying fails too (the seam: Raw does not destroy) -> still reported, and returned, since a
// lock or a pool slot may now be leaked; fn's error survives.
func TestDestroyFailsIsReportedAndReturned(t *testing.T) {
	t.Parallel()
	d, inj, db := faultDB(t)
	ln := lockName(d, "destroy-fails")
	rec := &recorder{}
	l := New(db, WithReporter(rec), WithWatchdog(0))
	conns := withSeam(l, db, func(c *sql.Conn) lockConn {
		return &seamConn{Conn: c, rawErr: errors.New("injected: cannot destroy")}
	})
	inj.Fail(`RELEASE_LOCK`, errors.New("injected: release query failed"))
	ran, err := l.TryDo(context.Background(), ln, func(context.Context) error { return errFn })
	if !ran {
		t.Fatalf("ran = false (err %v)", err)
	}
	checkFnErr(t, err, errFn)
	if err == nil || !strings.Contains(err.Error(), "cannot destroy") {
		t.Fatalf("a failed destroy leaves a leak and must be returned: got %v", err)
	}
	if rec.kinds() != "release_failed,destroy_failed" {
		t.Fatalf("incidents %q, want release_failed then destroy_failed", rec.kinds())
	}
	// The leak is real: the lock is still held. End it for real so the test leaves nothing.
	if holder(t, d.DB, ln) == 0 {
		t.Fatal("with destroy failing the lock should still be held (else this test proves nothing)")
	}
	if err := (*conns)[0].Raw(func(any) error { return driver.ErrBadConn }); !errors.Is(err, driver.ErrBadConn) {
		t.Fatal(err)
	}
	waitFree(t, d.DB, ln)
}

// RELEASE_LOCK answering 0 (another session holds it) or NULL (nobody does; our wrapper in
// locks.sql delivers it as -1) -> lock_lost and ErrLockLost, joined with fn's error. The rule
// passes the statement through, so the server really releases and only the answer is changed.
func TestReleaseReturnsNotOneIsLockLost(t *testing.T) {
	t.Parallel()
	for _, v := range []struct {
		name string
		val  driver.Value
	}{{"0", int64(0)}, {"NULL", int64(-1)}, {"text 0", []byte("0")}} {
		for _, fr := range fnResults {
			t.Run(v.name+"/"+fr.name, func(t *testing.T) {
				d, inj, db := faultDB(t)
				ln := lockName(d, "released-by-someone")
				rec := &recorder{}
				l := New(db, WithReporter(rec), WithWatchdog(0))
				inj.Add(faultdriver.Rule{Match: `RELEASE_LOCK`, Passthrough: true, Rows: [][]driver.Value{{v.val}}})
				ran, err := l.TryDo(context.Background(), ln, func(context.Context) error { return fr.err })
				if !ran {
					t.Fatalf("ran = false (err %v)", err)
				}
				if !errors.Is(err, ErrLockLost) {
					t.Fatalf("RELEASE_LOCK = %s must give ErrLockLost, got %v", v.name, err)
				}
				checkFnErr(t, err, fr.err)
				if rec.kinds() != "lock_lost" || rec.all()[0].ConnID == 0 {
					t.Fatalf("incidents %+v, want exactly one lock_lost with a connection id", rec.all())
				}
				waitFree(t, d.DB, ln)
			})
		}
	}
}

// The same two answers from the real server: the session loses the lock behind the code's
// back (RELEASE_ALL_LOCKS on the lock's own connection, watchdog off), then RELEASE_LOCK says
// NULL; and if a rival took it meanwhile, 0.
func TestReleaseReturnsNotOneOnRealServer(t *testing.T) {
	t.Parallel()
	for _, rival := range []bool{false, true} {
		name := map[bool]string{false: "NULL nobody holds it", true: "0 a rival holds it"}[rival]
		t.Run(name, func(t *testing.T) {
			d := testdb.New(t)
			ln := lockName(d, "real-loss")
			db := d.Open(t)
			rec := &recorder{}
			l := New(db, WithReporter(rec), WithWatchdog(0))
			conns := withSeam(l, db, func(c *sql.Conn) lockConn { return c })
			other, err := d.Conn(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			ran, err := l.TryDo(context.Background(), ln, func(ctx context.Context) error {
				var n sql.NullInt64
				if err := (*conns)[0].QueryRowContext(ctx, "SELECT RELEASE_ALL_LOCKS()").Scan(&n); err != nil {
					return err
				}
				if rival {
					if err := other.QueryRowContext(ctx, "SELECT GET_LOCK(?, 0)", ln).Scan(&n); err != nil || n.Int64 != 1 {
						t.Errorf("rival GET_LOCK = %v, %v", n, err)
					}
				}
				return errFn
			})
			if !ran || !errors.Is(err, ErrLockLost) || !errors.Is(err, errFn) {
				t.Fatalf("ran=%v err=%v: want ErrLockLost joined with fn's error", ran, err)
			}
			want := "NULL"
			if rival {
				want = "returned 0"
			}
			if rec.kinds() != "lock_lost" || !strings.Contains(rec.all()[0].Err.Error(), want) {
				t.Fatalf("incidents %+v, want one lock_lost saying %q", rec.all(), want)
			}
		})
	}
}

// GET_LOCK answering the string "0" (go-sql-driver v1.7.1 on the text protocol) is "not
// acquired": fn is not called, no error, no incident, the connection goes back to the pool.
func TestAcquireTextZeroIsNotAcquired(t *testing.T) {
	t.Parallel()
	d, inj, db := faultDB(t)
	ln := lockName(d, "text-zero")
	rec := &recorder{}
	l := New(db, WithReporter(rec))
	rule := inj.Return(`GET_LOCK`, []byte("0"), []byte("12345")) // acquired, conn_id as text
	ran, err := l.TryDo(context.Background(), ln, func(context.Context) error {
		t.Error("fn was called although GET_LOCK said 0")
		return nil
	})
	if ran || err != nil {
		t.Fatalf("ran=%v err=%v, want false, nil", ran, err)
	}
	if rule.Hits() != 1 || len(rec.all()) != 0 {
		t.Fatalf("hits %d, incidents %q: want the fault used and no incident", rule.Hits(), rec.kinds())
	}
	if s := db.Stats(); s.InUse != 0 || s.OpenConnections != 1 {
		t.Fatalf("pool %+v: the connection must be back in the pool", s)
	}
	if holder(t, d.DB, ln) != 0 {
		t.Fatal("lock is held: the fault did not replace GET_LOCK")
	}
}

// GET_LOCK answering NULL, or failing, is an error and an acquire_failed incident; fn is not
// called. A failed query also destroys the connection (its reply was lost: the session may
// hold the lock after all).
func TestAcquireNullOrErrorIsReported(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		rule      faultdriver.Rule
		destroyed bool
		connID    int64 // in the incident: known when the row arrived
	}{
		{"NULL through the COALESCE wrapper", faultdriver.Rule{Rows: [][]driver.Value{{int64(-1), int64(777)}}}, false, 777},
		{"raw NULL from a driver", faultdriver.Rule{Rows: [][]driver.Value{{nil, int64(777)}}}, true, 0},
		{"query error", faultdriver.Rule{Err: errors.New("injected: GET_LOCK failed")}, true, 0},
		{"reply lost after the server took the lock", faultdriver.Rule{Passthrough: true, Err: errors.New("injected: reply lost")}, true, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, inj, db := faultDB(t)
			ln := lockName(d, "acquire-null")
			rec := &recorder{}
			l := New(db, WithReporter(rec))
			c.rule.Match = `GET_LOCK`
			inj.Add(c.rule)
			ran, err := l.TryDo(context.Background(), ln, func(context.Context) error {
				t.Error("fn was called although GET_LOCK did not return 1")
				return nil
			})
			if ran || err == nil {
				t.Fatalf("ran=%v err=%v, want false and an error", ran, err)
			}
			if rec.kinds() != "acquire_failed" || rec.all()[0].Subject != ln || rec.all()[0].ConnID != c.connID {
				t.Fatalf("incidents %+v, want one acquire_failed for the lock", rec.all())
			}
			if s := db.Stats(); c.destroyed && s.OpenConnections != 0 || !c.destroyed && s.OpenConnections != 1 {
				t.Fatalf("pool %+v (destroyed expected: %v)", s, c.destroyed)
			}
			waitFree(t, d.DB, ln)
		})
	}
}

// The real server's NULL: KILL QUERY on a session waiting in GET_LOCK.
func TestAcquireKilledWaitIsReported(t *testing.T) {
	t.Parallel()
	d := testdb.New(t)
	ln := lockName(d, "killed-wait")
	rec := &recorder{}
	holderL := New(d.Open(t), WithWatchdog(0))
	waiter := New(d.Open(t), WithReporter(rec))
	defer holdLock(t, holderL, ln)()
	type res struct {
		ran bool
		err error
	}
	waited := make(chan res, 1)
	go func() {
		ran, err := waiter.Do(context.Background(), ln, 30*time.Second, func(context.Context) error {
			t.Error("fn ran after a killed wait")
			return nil
		})
		waited <- res{ran, err}
	}()
	// Find the waiting session and kill its query (not the session).
	var id int64
	testutil.Eventually(t, 5*time.Second, "the waiter to show up in PROCESSLIST", func() bool {
		if ids := lockWaiters(t, d); len(ids) > 0 {
			id = ids[0]
		}
		return id != 0
	})
	// The id is formatted in: MySQL refuses a placeholder outside DML (error 6413). A KILL QUERY
	// can land while the statement is just starting, when PROCESSLIST already shows it, and be
	// lost (once in CI on MariaDB 11.8: the wait ran its 30s); the waiter is then still waiting,
	// so the kill is sent again until it ends.
	var r res
	for kills := 1; ; kills++ {
		d.MustExec(t, "KILL QUERY "+strconv.FormatInt(id, 10))
		select {
		case r = <-waited:
			if kills > 1 {
				t.Logf("the wait ended after %d KILL QUERY", kills)
			}
		case <-time.After(time.Second):
			if kills < 5 {
				continue
			}
			t.Fatalf("the waiter still waits after %d KILL QUERY", kills)
		}
		break
	}
	if r.ran || r.err == nil {
		t.Fatalf("ran=%v err=%v, want an error", r.ran, r.err)
	}
	// The servers fail the killed wait differently. MariaDB: GET_LOCK returns NULL, in a row
	// that carries the session's id. MySQL 9.7: the statement itself fails with error 1317
	// (query execution was interrupted) and returns no row, so the runtime cannot name the
	// session in the incident (ConnID 0). Either way: an error and one acquire_failed report.
	wantConn := id
	var myErr *mysql.MySQLError
	switch {
	case strings.Contains(r.err.Error(), "returned NULL"):
	case errors.As(r.err, &myErr) && myErr.Number == 1317:
		wantConn = 0
	default:
		t.Fatalf("err=%v, want an error saying GET_LOCK returned NULL (MariaDB) or was interrupted, 1317 (MySQL)", r.err)
	}
	if rec.kinds() != "acquire_failed" || rec.all()[0].ConnID != wantConn {
		t.Fatalf("incidents %+v, want acquire_failed for the killed waiter (connection id %d)", rec.all(), wantConn)
	}
}

// No leaks: 500 cycles whose release fails leave the pool at its baseline and the lock free.
// Without the destroy, the lock would stay on a pooled session and IS_USED_LOCK would name it.
func TestNoLeakAfterManyReleaseFailures(t *testing.T) {
	t.Parallel()
	d, inj, db := faultDB(t)
	ln := lockName(d, "leak")
	rec := &recorder{}
	l := New(db, WithReporter(rec), WithWatchdog(0))
	ctx := context.Background()
	noop := func(context.Context) error { return nil }
	if ran, err := l.TryDo(ctx, ln, noop); !ran || err != nil {
		t.Fatal(ran, err)
	}
	base := db.Stats()
	var baseSessions int
	sessions := func() int { return len(sessionsIn(t, d)) }
	baseSessions = sessions()

	const cycles = 500
	rule := inj.Fail(`RELEASE_LOCK`, errors.New("injected: release failed"))
	start := time.Now()
	busy := 0 // TryDo calls that found the lock still held by the previous, dying session
	for i := 0; i < cycles; i++ {
		// The server frees a destroyed session's lock when it notices the closed socket, a
		// moment after the client closed it; a leaked lock would stay held and fail here.
		testutil.Eventually(t, 5*time.Second, fmt.Sprintf("cycle %d: the lock freed (held 5s: leaked)", i), func() bool {
			ran, err := l.TryDo(ctx, ln, noop)
			if err != nil {
				t.Fatalf("cycle %d: %v", i, err)
			}
			if !ran {
				busy++
			}
			return ran
		})
	}
	elapsed := time.Since(start)
	rule.Remove()
	if n := len(rec.of(incident.ReleaseFailed)); n != cycles || len(rec.all()) != cycles {
		t.Fatalf("incidents: %d release_failed of %d, want %d and nothing else", n, len(rec.all()), cycles)
	}
	waitFree(t, d.DB, ln)
	if ran, err := l.TryDo(ctx, ln, noop); !ran || err != nil {
		t.Fatal(ran, err)
	}
	if s := db.Stats(); s.OpenConnections != base.OpenConnections || s.InUse != 0 {
		t.Fatalf("pool after %d failed releases: %+v, baseline %+v", cycles, s, base)
	}
	// The server may take a moment to notice the last closed sockets.
	testutil.Eventually(t, 5*time.Second, fmt.Sprintf("server sessions on this database back to the baseline %d", baseSessions), func() bool {
		return sessions() <= baseSessions
	})
	t.Logf("%d cycles with a destroyed connection each: %v (%v per cycle); %d TryDo calls (%.1f%%) found the destroyed session's lock not yet freed",
		cycles, elapsed, elapsed/cycles, busy, 100*float64(busy)/float64(cycles+busy))
}
