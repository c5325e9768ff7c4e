package outbox

import (
	"context"
	"database/sql"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/internal/faultdriver"
	"github.com/outboxgen/outboxgen/internal/testdb"
	"github.com/outboxgen/outboxgen/internal/testutil"
	"github.com/outboxgen/outboxgen/runtime/incident"
)

// testLogger is quiet unless OUTBOX_TEST_LOG is set.
func testLogger() *slog.Logger {
	if os.Getenv("OUTBOX_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// fastConfig fills the zero fields of c with values that keep tests quick.
func fastConfig(c Config) Config {
	if c.PollInterval == 0 {
		c.PollInterval = 20 * time.Millisecond
	}
	if c.StaleAfter == 0 {
		c.StaleAfter = 2 * time.Minute // above the default 1m event timeout; tests that reclaim set their own
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = 2 * time.Second
	}
	if c.Logger == nil {
		c.Logger = testLogger()
	}
	return c
}

func newTestWorker(t testing.TB, db *sql.DB, r *Router, c Config) *Worker {
	t.Helper()
	w, err := NewWorker(db, r, fastConfig(c))
	if err != nil {
		t.Fatalf("NewWorker: %v", err)
	}
	return w
}

// start runs w until the returned stop is called (or the test ends); stop waits for Run and
// fails the test if Run returned an error.
func start(t testing.TB, w *Worker) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-errc:
				if err != nil {
					t.Errorf("Run returned %v, want nil", err)
				}
			case <-time.After(30 * time.Second):
				t.Errorf("Run did not return within 30s of cancel")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// incidents records reported incidents.
type incidents struct {
	mu  sync.Mutex
	all []incident.Incident
}

func (in *incidents) Report(_ context.Context, i incident.Incident) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.all = append(in.all, i)
}

func (in *incidents) count(k incident.Kind) int {
	in.mu.Lock()
	defer in.mu.Unlock()
	n := 0
	for _, i := range in.all {
		if i.Kind == k {
			n++
		}
	}
	return n
}

func (in *incidents) first(k incident.Kind) incident.Incident {
	in.mu.Lock()
	defer in.mu.Unlock()
	for _, i := range in.all {
		if i.Kind == k {
			return i
		}
	}
	return incident.Incident{}
}

// calls records handler invocations.
type calls struct {
	mu         sync.Mutex
	n          map[MessageID]int
	deliveries []Delivery
	payloads   map[MessageID]string
}

func newCalls() *calls { return &calls{n: map[MessageID]int{}, payloads: map[MessageID]string{}} }

func (c *calls) add(d Delivery, payload []byte) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[d.MessageID]++
	c.deliveries = append(c.deliveries, d)
	c.payloads[d.MessageID] = string(payload)
	return c.n[d.MessageID]
}

func (c *calls) of(id MessageID) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[id]
}

func (c *calls) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.deliveries)
}

func statusOf(t testing.TB, db DBTX, id MessageID) string { return getRow(t, db, id).Status }

// faultyDB is a migrated test database and a pool on it through a fault-injecting driver.
func faultyDB(t testing.TB) (*testdb.DB, *faultdriver.Injector, *sql.DB) {
	t.Helper()
	d := migrated(t)
	inj, db := d.OpenFaulty(t)
	return d, inj, db
}

// logRecords keeps the records a logger writes, for tests about what the worker logs.
type logRecords struct {
	mu  sync.Mutex
	all []slog.Record
}

func (l *logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecords) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logRecords) WithGroup(string) slog.Handler            { return l }
func (l *logRecords) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all = append(l.all, r.Clone())
	return nil
}

// errorLines returns the messages of the error-level records, with their kind attribute if any.
func (l *logRecords) errorLines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, r := range l.all {
		if r.Level < slog.LevelError {
			continue
		}
		line := r.Message
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "kind" {
				line += " kind=" + a.Value.String()
			}
			return true
		})
		out = append(out, line)
	}
	return out
}

// count returns how many records have message msg.
func (l *logRecords) count(msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.all {
		if r.Message == msg {
			n++
		}
	}
	return n
}

// find returns the attributes of the first record with message msg.
func (l *logRecords) find(msg string) (map[string]string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.all {
		if r.Message == msg {
			attrs := map[string]string{}
			r.Attrs(func(a slog.Attr) bool {
				attrs[a.Key] = a.Value.String()
				return true
			})
			return attrs, true
		}
	}
	return nil, false
}

// signals enables w's test signals and returns them; call it before start.
func signals(t testing.TB, w *Worker) *workerTestSignals {
	w.testSignals.init(t)
	return &w.testSignals
}

// awaitClaims waits until n claims that began after this call have ended, so a test can
// watch the worker poll n times instead of sleeping for a guess of n polls.
func (s *workerTestSignals) awaitClaims(n int) {
	s.claimed.Clear()
	s.claimed.WaitOrTimeout() // may have begun before the Clear
	for range n {
		s.claimed.WaitOrTimeout()
	}
}

// awaitLeaseExpired waits until the server's clock has passed id's reclaim_after: a reclaim
// then returns the row. The lease runs on the server's clock, so no local timer can tell.
func awaitLeaseExpired(t testing.TB, db DBTX, id MessageID) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, "the lease to expire", func() bool {
		return dbNow(t, db).After(getRow(t, db, id).ReclaimAfter.Time)
	})
}
