package mysqllock

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/outboxgen/outboxgen/runtime/incident"
	"github.com/outboxgen/outboxgen/runtime/internal/store"
)

// ErrLockLost is returned (joined with the critical section's own error) when the lock was lost
// while the section ran: RELEASE_LOCK returned 0 or NULL, or the watchdog found another session,
// or none, holding it. Another instance may have run at the same time: check the data. It is also
// the cause (context.Cause) of the section's context when the watchdog cancels it.
var ErrLockLost = errors.New("mysqllock: lock lost while the critical section ran")

// Locker takes named locks on a *sql.DB. It is safe for concurrent use; each held lock has its
// own pinned connection, so a Locker holding n locks uses n connections of the pool.
type Locker struct {
	db             *sql.DB
	q              *store.Queries
	reporter       incident.Reporter
	logger         *slog.Logger
	watchdog       time.Duration
	releaseTimeout time.Duration
	instance       string
	instanceErr    error // a WithInstance name the ledger cannot store; RunJob returns it

	// openConn pins a connection. It returns *sql.Conn in production; tests swap in a wrapper
	// for the two failures database/sql never produces (see lockConn).
	openConn func(ctx context.Context) (lockConn, error)
	// now is the jobs' clock; tests shift it to reach a daily schedule's time in a second.
	now func() time.Time

	jobsMu sync.Mutex
	jobs   map[string]*jobState
}

// lockConn is what Locker needs of *sql.Conn. The seam exists for tests only: database/sql drops
// the driver's Close error (Conn.Close of a live connection never fails), and Raw returning
// driver.ErrBadConn always discards the connection, so "giving the connection back failed" and
// "destroying it failed" can only be reached through a wrapper.
type lockConn interface {
	store.DBTX
	Raw(f func(driverConn any) error) error
	Close() error
}

// Option configures a Locker.
type Option func(*Locker)

// WithReporter sets where incidents go (lock lost, release failed, return failed, destroy failed,
// acquire failed). Each carries the server-side lock name (ServerName(name)) as Subject, which
// is what IS_USED_LOCK and the server's lock tables show, the session's CONNECTION_ID() when
// known, and the cause. RunJob also reports a job's panic (incident.JobPanicked) and a run the
// ledger could not record (incident.JobNotRecorded), with the job's Name as Subject.
// Defaults to incident.Slog(nil): one error-level line on slog.Default().
func WithReporter(r incident.Reporter) Option { return func(l *Locker) { l.reporter = r } }

// WithWatchdog sets how often the watchdog checks, while a critical section runs, that the lock
// is still held by the lock's own session; the first check that finds it lost cancels the
// section's context. The interval bounds how long a section may run on after its lock was
// lost, while another instance may hold it (see the package documentation, "A lost lock").
// Each check is one IS_USED_LOCK query on the lock's connection. Zero or negative turns the
// watchdog off (the loss is then seen only at release). Defaults to 1s.
func WithWatchdog(every time.Duration) Option { return func(l *Locker) { l.watchdog = every } }

// defaultWatchdog is the watchdog interval unless WithWatchdog says otherwise: a query a second
// per held lock costs little, and it bounds the window of a lost lock.
const defaultWatchdog = time.Second

// WithReleaseTimeout bounds RELEASE_LOCK and each watchdog check; they run on a context the
// caller's cancellation cannot kill, so that a cancelled job still releases its lock.
// Defaults to 10s.
func WithReleaseTimeout(d time.Duration) Option {
	return func(l *Locker) { l.releaseTimeout = d }
}

// WithLogger sets the logger for job activity (skipped ticks, runs, failures). Incidents go to
// the Reporter. Defaults to slog.Default().
func WithLogger(lg *slog.Logger) Option { return func(l *Locker) { l.logger = lg } }

// WithInstance names this process in the job run ledger (outbox_job_runs.instance): valid
// UTF-8 of at most 191 characters (MaxInstance), the column's width. A longer or invalid name
// is not shortened behind your back: every RunJob of the Locker returns an error naming this
// option at once, before its first tick. Defaults to "<hostname>:<pid>", with the hostname
// shortened (on a character boundary) if that would not fit.
func WithInstance(name string) Option { return func(l *Locker) { l.instance = name } }

// New returns a Locker on db. Each held lock pins one connection of db's pool for its whole
// life, and the critical section (and a job's run ledger) uses others, so a pool limited to one
// connection (SetMaxOpenConns(1)) deadlocks. The DSN's readTimeout, if set, must exceed the
// longest wait given to Do (rounded down to whole seconds: GET_LOCK waits no longer in one
// call), or the driver kills the connection in the middle of GET_LOCK.
func New(db *sql.DB, opts ...Option) *Locker {
	l := &Locker{
		db:             db,
		q:              store.New(),
		watchdog:       defaultWatchdog,
		releaseTimeout: 10 * time.Second,
		now:            time.Now,
		jobs:           map[string]*jobState{},
	}
	l.openConn = func(ctx context.Context) (lockConn, error) { return db.Conn(ctx) }
	for _, o := range opts {
		o(l)
	}
	if l.reporter == nil {
		l.reporter = incident.Slog(nil)
	}
	if l.logger == nil {
		l.logger = slog.Default()
	}
	if l.releaseTimeout <= 0 {
		l.releaseTimeout = 10 * time.Second
	}
	if l.instance == "" {
		host, err := os.Hostname()
		if err != nil {
			host = "unknown-host" // the name is informational; the ledger's key is (job, period).
		}
		l.instance = defaultInstance(host, os.Getpid())
	} else if n := utf8.RuneCountInString(l.instance); n > MaxInstance || !utf8.ValidString(l.instance) {
		// New cannot fail, so RunJob reports it: a ledger write would fail on it every time.
		l.instanceErr = fmt.Errorf("WithInstance(%.40q): the name must be valid UTF-8 of at most %d characters (outbox_job_runs.instance is VARCHAR(%d)), got %d bytes, %d characters",
			l.instance, MaxInstance, MaxInstance, len(l.instance), n)
	}
	return l
}

// defaultInstance is "<host>:<pid>", the host cut on a character boundary so that the whole fits
// in outbox_job_runs.instance and the pid, which tells two processes of one host apart, stays.
func defaultInstance(host string, pid int) string {
	suffix := ":" + strconv.Itoa(pid)
	host = strings.ToValidUTF8(host, "?")
	room := MaxInstance - len(suffix)
	for i := range host {
		if room == 0 {
			host = host[:i]
			break
		}
		room--
	}
	return host + suffix
}

// TryDo runs fn while holding the named lock, if it is free right now (GET_LOCK with a zero
// wait). ran is false with a nil error when another session holds the lock. fn's context is
// cancelled when the watchdog finds the lock lost. The returned error is fn's, joined with
// ErrLockLost when the lock was lost and with cleanup errors that leave something leaked; a
// failed RELEASE_LOCK or a failed return to the pool is repaired by destroying the connection
// and reported, not returned, because fn did run under the lock until the end. An empty name,
// a NULL from GET_LOCK or a failed query is an error with ran=false, and fn is not called.
func (l *Locker) TryDo(ctx context.Context, name string, fn func(ctx context.Context) error) (ran bool, err error) {
	return l.do(ctx, name, 0, fn)
}

// Do is TryDo waiting up to wait for the lock; ran=false with a nil error means the wait ran
// out. Fractions of a second are honoured on every server. GET_LOCK itself waits the whole
// seconds, because MySQL rounds a fractional timeout. The rest is polled with GET_LOCK(name, 0)
// on the same connection every 5 to 50ms. So in that part of the wait, the lock may be taken up
// to 50ms after it was freed. Cancelling ctx abandons the wait. During GET_LOCK the driver
// closes that connection, so nothing stays queued on the server.
func (l *Locker) Do(ctx context.Context, name string, wait time.Duration, fn func(ctx context.Context) error) (ran bool, err error) {
	if wait < 0 {
		// MariaDB answers a negative timeout with NULL, MySQL waits forever: refuse both.
		return false, fmt.Errorf("mysqllock: Do(%q): negative wait %v", name, wait)
	}
	return l.do(ctx, name, wait, fn)
}

func (l *Locker) do(ctx context.Context, name string, wait time.Duration, fn func(ctx context.Context) error) (ran bool, err error) {
	if name == "" {
		return false, errors.New("mysqllock: empty lock name")
	}
	if fn == nil {
		return false, fmt.Errorf("mysqllock: lock %q: nil function", name)
	}
	h, err := l.acquire(ctx, ServerName(name), wait)
	if err != nil || h == nil {
		return false, err
	}

	fnCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	h.startWatchdog(fnCtx, cancel)

	finished := false
	defer func() {
		if !finished {
			// fn panicked: release before the panic travels on, or the lock would stay on a
			// connection nobody closes, which is the dead cron again.
			cancel(errPanicked)
			_ = h.release(ctx, errPanicked) // its incidents are reported; the panic is the error.
		}
	}()
	fnErr := fn(fnCtx)
	finished = true
	cancel(nil)
	return true, h.release(ctx, fnErr)
}

var errPanicked = errors.New("mysqllock: the critical section panicked")

// held is one acquired lock and its pinned connection.
type held struct {
	l      *Locker
	name   string // server name
	conn   lockConn
	connID int64

	// The watchdog runs in its own goroutine; release closes stop and waits for done before it
	// touches conn, so the two never query the one connection at the same time (a Conn runs one
	// statement at a time). lost is written by the watchdog before done closes.
	stop chan struct{}
	done chan struct{}
	lost error
}

// Polling a lock for the part of a wait that is not a whole second: the pause between
// GET_LOCK(name, 0) calls starts short, so a lock freed soon is taken soon, and doubles up to
// pollMax, so a long poll costs at most a few queries a second.
const (
	pollMin = 5 * time.Millisecond
	pollMax = 50 * time.Millisecond
)

// acquire returns nil, nil when the lock is held elsewhere until wait has passed.
//
// GET_LOCK is given whole seconds only. MySQL rounds its timeout: 0.4 returns 0 at once, 1.6
// waits 2 seconds. A fractional timeout would so wait too little or too long. Whatever is left
// after the whole seconds is polled with GET_LOCK(name, 0), on the same connection: a named lock
// belongs to the session that took it.
func (l *Locker) acquire(ctx context.Context, name string, wait time.Duration) (*held, error) {
	c, err := l.openConn(ctx)
	if err != nil {
		return nil, fmt.Errorf("mysqllock: lock %q: get a connection: %w", name, err)
	}
	deadline := time.Now().Add(wait)
	pause := pollMin
	for {
		secs := int64(time.Until(deadline) / time.Second)
		if secs < 0 {
			secs = 0
		}
		// Through sqlc like all SQL, wrapped so that NULL arrives as -1 and sqlc generates int64
		// instead of its (wrong) bool: queries/locks.sql says why. Only exactly 1 is "acquired";
		// a text "0" from an old driver converts to 0, never to "truthy".
		r, err := l.q.LockAcquire(ctx, c, store.LockAcquireParams{Name: name, WaitSeconds: secs})
		if err != nil {
			err = fmt.Errorf("mysqllock: GET_LOCK(%q): %w", name, err)
			if ctx.Err() == nil {
				// The caller's own cancellation is not an incident; anything else is.
				l.report(ctx, incident.AcquireFailed, name, 0, err)
			}
			// The reply was lost, so the session may hold the lock after all: end it.
			return nil, errors.Join(err, l.destroy(ctx, c, name, 0))
		}
		switch r.Acquired {
		case 1:
			return &held{l: l, name: name, conn: c, connID: r.ConnID}, nil
		case 0:
		default:
			what := "NULL (the server failed the call: KILL QUERY, an error)"
			if r.Acquired != -1 {
				what = strconv.FormatInt(r.Acquired, 10)
			}
			err := fmt.Errorf("mysqllock: GET_LOCK(%q) on connection %d returned %s: not acquired", name, r.ConnID, what)
			l.report(ctx, incident.AcquireFailed, name, r.ConnID, err)
			return nil, errors.Join(err, l.giveBack(ctx, c, name, r.ConnID))
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil, l.giveBack(ctx, c, name, r.ConnID)
		}
		// The last call happens at the deadline, not before it: the caller asked for the
		// whole wait.
		t := time.NewTimer(min(pause, left))
		select {
		case <-ctx.Done():
			t.Stop()
			// Between two calls the session holds nothing: it can go back to the pool.
			return nil, join(fmt.Errorf("mysqllock: waiting for lock %q: %w", name, ctx.Err()),
				l.giveBack(ctx, c, name, r.ConnID))
		case <-t.C:
		}
		pause = min(2*pause, pollMax)
	}
}

func (h *held) startWatchdog(fnCtx context.Context, cancel context.CancelCauseFunc) {
	if h.l.watchdog <= 0 {
		return
	}
	h.stop = make(chan struct{})
	h.done = make(chan struct{})
	go func() {
		defer close(h.done)
		t := time.NewTicker(h.l.watchdog)
		defer t.Stop()
		for {
			select {
			case <-h.stop:
				return
			case <-t.C:
			}
			if err := h.check(fnCtx); err != nil {
				h.lost = err
				h.l.report(fnCtx, incident.LockLost, h.name, h.connID, err)
				cancel(err)
				return
			}
		}
	}()
}

// check asks the lock's own session whether it still holds the lock. A failed query counts as
// lost: on a pinned connection it means the session is gone (or about to be: the driver closes
// a connection whose query timed out).
func (h *held) check(fnCtx context.Context) error {
	// Not fnCtx itself: cancelling a running query makes the driver close the connection.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(fnCtx), h.l.releaseTimeout)
	defer cancel()
	row, err := h.l.q.LockHolder(ctx, h.conn, h.name)
	if err != nil {
		return fmt.Errorf("%w: watchdog: IS_USED_LOCK(%q) on connection %d: %w", ErrLockLost, h.name, h.connID, err)
	}
	if row.Holder != h.connID || row.ConnID != h.connID {
		holder := "nobody"
		if row.Holder != 0 {
			holder = "connection " + strconv.FormatInt(row.Holder, 10)
		}
		return fmt.Errorf("%w: watchdog: lock %q is held by %s, not by connection %d", ErrLockLost, h.name, holder, h.connID)
	}
	return nil
}

// release ends the critical section. fnErr is always part of what it returns.
func (h *held) release(ctx context.Context, fnErr error) error {
	if h.stop != nil {
		close(h.stop)
		<-h.done
	}
	l := h.l
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.releaseTimeout)
	defer cancel()

	if h.lost != nil {
		// Reported by the watchdog already. The session is dead or holds nothing we know of:
		// destroy it rather than pool it.
		return join(fnErr, h.lost, l.destroy(rctx, h.conn, h.name, h.connID))
	}
	v, err := l.q.LockRelease(rctx, h.conn, h.name)
	if err != nil {
		// The seed's trap: returning this connection to the pool would keep the session, and the
		// lock with it, forever. Ending the session frees the lock on the server.
		err = fmt.Errorf("mysqllock: RELEASE_LOCK(%q) on connection %d: %w", h.name, h.connID, err)
		l.report(rctx, incident.ReleaseFailed, h.name, h.connID, err)
		return join(fnErr, l.destroy(rctx, h.conn, h.name, h.connID))
	}
	if v != 1 {
		what := "NULL (nobody held it)"
		if v == 0 {
			what = "0 (another session holds it)"
		} else if v != -1 {
			what = strconv.FormatInt(v, 10)
		}
		lost := fmt.Errorf("%w: RELEASE_LOCK(%q) on connection %d returned %s", ErrLockLost, h.name, h.connID, what)
		l.report(rctx, incident.LockLost, h.name, h.connID, lost)
		// The session is not in the state we believed: do not hand it to the next borrower.
		return join(fnErr, lost, l.destroy(rctx, h.conn, h.name, h.connID))
	}
	return join(fnErr, l.giveBack(rctx, h.conn, h.name, h.connID))
}

// giveBack returns c to the pool, destroying it if that fails. The error it returns is only
// the one that leaves something leaked (destroy failed); the rest is reported.
func (l *Locker) giveBack(ctx context.Context, c lockConn, name string, connID int64) error {
	if err := c.Close(); err != nil {
		l.report(ctx, incident.ReturnFailed, name, connID,
			fmt.Errorf("mysqllock: return connection %d of lock %q to the pool: %w", connID, name, err))
		return l.destroy(ctx, c, name, connID)
	}
	return nil
}

// destroy makes database/sql close c's driver connection instead of pooling it, which ends the
// server session and frees every lock it held. It returns (and reports) an error only when
// that did not happen.
func (l *Locker) destroy(ctx context.Context, c lockConn, name string, connID int64) error {
	err := c.Raw(func(any) error { return driver.ErrBadConn })
	if errors.Is(err, driver.ErrBadConn) {
		return nil // database/sql discarded the connection: Conn.Raw -> putConn drops bad conns.
	}
	if errors.Is(err, sql.ErrConnDone) {
		// database/sql already let go of it: a statement that failed with driver.ErrBadConn
		// makes it close the Conn and discard the driver connection (sql.go:
		// closemuRUnlockCondReleaseConn). A successful Close would also end here, but destroy is
		// never called after one.
		return nil
	}
	if err == nil {
		err = errors.New("conn.Raw returned nil instead of the driver.ErrBadConn passed in")
	}
	err = fmt.Errorf("mysqllock: destroy connection %d of lock %q (lock or pool slot may be leaked): %w", connID, name, err)
	l.report(ctx, incident.DestroyFailed, name, connID, err)
	return err
}

func (l *Locker) report(ctx context.Context, kind incident.Kind, name string, connID int64, err error) {
	l.reporter.Report(context.WithoutCancel(ctx), incident.Incident{Kind: kind, Subject: name, ConnID: connID, Err: err})
}

// join is errors.Join that returns a lone error unchanged, so callers comparing fn's error
// with == still can when nothing else went wrong.
func join(errs ...error) error {
	var n []error
	for _, e := range errs {
		if e != nil {
			n = append(n, e)
		}
	}
	switch len(n) {
	case 0:
		return nil
	case 1:
		return n[0]
	}
	return errors.Join(n...)
}
