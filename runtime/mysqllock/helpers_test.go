package mysqllock

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/internal/testdb"
	"github.com/outboxgen/outboxgen/internal/testutil"
	"github.com/outboxgen/outboxgen/runtime/incident"
)

// recorder is an incident.Reporter that keeps what it is given.
type recorder struct {
	mu  sync.Mutex
	ins []incident.Incident
}

func (r *recorder) Report(_ context.Context, in incident.Incident) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ins = append(r.ins, in)
}

func (r *recorder) all() []incident.Incident {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]incident.Incident(nil), r.ins...)
}

func (r *recorder) of(k incident.Kind) []incident.Incident {
	var out []incident.Incident
	for _, in := range r.all() {
		if in.Kind == k {
			out = append(out, in)
		}
	}
	return out
}

// kinds lists the incident kinds in order, for failure messages and exact comparisons.
func (r *recorder) kinds() string {
	var ks []string
	for _, in := range r.all() {
		ks = append(ks, string(in.Kind))
	}
	return strings.Join(ks, ",")
}

// holdLock holds name with l in the background until the returned release is called; release
// lets fn return, waits for TryDo, and fails the test on its error.
func holdLock(t testing.TB, l *Locker, name string) (release func()) {
	t.Helper()
	stop := make(chan struct{})
	holding := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		ran, err := l.TryDo(context.Background(), name, func(context.Context) error {
			close(holding)
			<-stop
			return nil
		})
		if err == nil && !ran {
			err = errors.New("TryDo: the lock was busy")
		}
		done <- err
	}()
	select {
	case <-holding:
	case err := <-done:
		t.Fatalf("holding %s: %v", name, err)
	}
	return func() {
		close(stop)
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

// holder returns the CONNECTION_ID() holding the server lock name, 0 when free.
func holder(t testing.TB, db *sql.DB, name string) int64 {
	t.Helper()
	var id sql.NullInt64
	if err := db.QueryRow("SELECT IS_USED_LOCK(?)", name).Scan(&id); err != nil {
		t.Fatalf("IS_USED_LOCK(%q): %v", name, err)
	}
	return id.Int64
}

// waitFree waits (briefly: the server notices a closed socket asynchronously) until the lock
// is free, and fails the test if it does not become free.
func waitFree(t testing.TB, db *sql.DB, name string) {
	t.Helper()
	testutil.Eventually(t, 5*time.Second, fmt.Sprintf("lock %q to be free (still held: it leaked)", name), func() bool {
		return holder(t, db, name) == 0
	})
}

// sessions lists the server's sessions (see testdb.Sessions: never information_schema, whose
// reads fail while another test runs a statement holding an emoji).
func sessions(t testing.TB, db *sql.DB) []testdb.Session {
	t.Helper()
	ss, err := testdb.Sessions(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	return ss
}

// lockWaiters returns the ids of d's sessions with a GET_LOCK in flight.
func lockWaiters(t testing.TB, d *testdb.DB) []int64 {
	t.Helper()
	var ids []int64
	for _, s := range sessions(t, d.DB) {
		if s.DB == d.Name && bytes.Contains(s.Info, []byte("GET_LOCK")) {
			ids = append(ids, s.ID)
		}
	}
	return ids
}

// sessionsIn returns the ids of d's sessions, the one that asks included.
func sessionsIn(t testing.TB, d *testdb.DB) []int64 {
	t.Helper()
	var ids []int64
	for _, s := range sessions(t, d.DB) {
		if s.DB == d.Name {
			ids = append(ids, s.ID)
		}
	}
	return ids
}

// waitRunning waits until session id runs a statement that starts with prefix.
func waitRunning(t testing.TB, db *sql.DB, id int64, prefix string) {
	t.Helper()
	testutil.Eventually(t, 5*time.Second, fmt.Sprintf("session %d to run a statement starting %q", id, prefix), func() bool {
		for _, s := range sessions(t, db) {
			if s.ID == id && bytes.HasPrefix(s.Info, []byte(prefix)) {
				return true
			}
		}
		return false
	})
}

// waitGone waits until session id is no longer on the server (destroyed).
func waitGone(t testing.TB, db *sql.DB, id int64) {
	t.Helper()
	if id == 0 {
		t.Fatal("waitGone: connection id 0: the incident did not carry CONNECTION_ID()")
	}
	testutil.Eventually(t, 5*time.Second, fmt.Sprintf("session %d to leave the server (the connection destroyed)", id), func() bool {
		for _, s := range sessions(t, db) {
			if s.ID == id {
				return false
			}
		}
		return true
	})
}

// seamConn wraps a real *sql.Conn for the two failures database/sql never produces.
type seamConn struct {
	*sql.Conn
	closeErr error // Close returns this without closing (the pool refused it back)
	rawErr   error // Raw returns this without destroying
}

func (c *seamConn) Close() error {
	if c.closeErr != nil {
		return c.closeErr
	}
	return c.Conn.Close()
}

func (c *seamConn) Raw(f func(any) error) error {
	if c.rawErr != nil {
		return c.rawErr
	}
	return c.Conn.Raw(f)
}

// withSeam makes l pin its connections through wrap, and records every *sql.Conn it pinned.
func withSeam(l *Locker, db *sql.DB, wrap func(*sql.Conn) lockConn) *[]*sql.Conn {
	var mu sync.Mutex
	var conns []*sql.Conn
	l.openConn = func(ctx context.Context) (lockConn, error) {
		c, err := db.Conn(ctx)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
		return wrap(c), nil
	}
	return &conns
}

var errFn = errors.New("the critical section's own error")

// lockName makes base unique to the test's database. Lock names are server-wide, not
// per database, so two runs of this suite on one server (or parallel tests) must not share them.
func lockName(d *testdb.DB, base string) string {
	return d.Name[len(d.Name)-8:] + ":" + base
}
