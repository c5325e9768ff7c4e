package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/internal/testutil"
)

// ormPool is an ORM's handle outside a transaction, shaped as GORM's PrepareStmt pool: it can
// begin transactions (returning its own interface type, not *sql.Tx) and has neither Commit
// nor Stats. Every statement on it autocommits.
type ormPool struct {
	db    *sql.DB
	begun atomic.Int64
}

// ormConnPool is what ormPool.BeginTx returns, as GORM's BeginTx returns its ConnPool.
type ormConnPool interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

type ormTx struct{ *sql.Tx }

func (p *ormPool) BeginTx(ctx context.Context, opts *sql.TxOptions) (ormConnPool, error) {
	tx, err := p.db.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	p.begun.Add(1)
	return ormTx{tx}, nil
}

func (p *ormPool) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return p.db.ExecContext(ctx, query, args...)
}

func (p *ormPool) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return p.db.QueryContext(ctx, query, args...)
}

func (p *ormPool) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return p.db.QueryRowContext(ctx, query, args...)
}

// connWrapper is an application's type around a pinned connection.
type connWrapper struct{ *sql.Conn }

// orphans counts ordered messages that wait for delivery without their queue entry: no worker
// will ever claim them.
func orphans(t testing.TB, db DBTX) int {
	t.Helper()
	var n int
	err := db.QueryRowContext(context.Background(), `SELECT COUNT(*) FROM outbox_messages m
		WHERE m.ordering_key IS NOT NULL AND m.status = 'PENDING'
		AND NOT EXISTS (SELECT 1 FROM outbox_ordering_queue q WHERE q.message_id = m.id)`).Scan(&n)
	if err != nil {
		t.Fatalf("count orphans: %v", err)
	}
	return n
}

// An ordered Standalone enqueue is several statements; on a handle that autocommits, a deadline
// between them committed the message without its queue entry, PENDING forever. Calls with
// random deadlines of 0-1.5 ms, on a pool of 8 connections, on an ORM's pool and on pinned
// connections: every message that exists has its queue entry, every call that returned nil
// has its message, and a worker delivers each message exactly once; Stats then shows nothing
// pending or held.
func TestStandaloneOrderedEnqueueUnderDeadlinesIsAtomic(t *testing.T) {
	t.Parallel()
	d := migrated(t)
	pool, err := sql.Open("mysql", d.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	pool.SetMaxOpenConns(8)
	orm := &ormPool{db: pool}

	type outcome struct {
		ok, failed atomic.Int64
		mu         sync.Mutex
		ids        []MessageID
	}
	const perHandle, goroutines = 300, 8
	run := func(name string, enqueue func(ctx context.Context, m Message) (MessageID, error)) *outcome {
		var out outcome
		var wg sync.WaitGroup
		var next atomic.Int64
		for g := 0; g < goroutines; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				r := rand.New(rand.NewPCG(uint64(g), uint64(time.Now().UnixNano())))
				// Deadlines are drawn from 0 to bound: 1.5 ms, or more where calls are slower (a
				// loaded machine, the race detector). The bound grows after a call that failed
				// and shrinks after one that did not, so that calls end each way about as often
				// and many deadlines land between two statements.
				bound := 1500 * time.Microsecond
				for {
					i := next.Add(1)
					if i > perHandle {
						return
					}
					key := fmt.Sprintf("%s:k%d", name, r.IntN(8))
					m := Message{EventType: "atomic_ordered", OrderingKey: key, Payload: json.RawMessage(fmt.Sprintf(`{"handle":%q,"i":%d}`, name, i))}
					ctx, cancel := context.WithTimeout(context.Background(), time.Duration(r.Int64N(int64(bound))))
					id, err := enqueue(ctx, m)
					cancel()
					if err != nil {
						out.failed.Add(1)
						bound += bound / 5
						continue
					}
					bound = max(1500*time.Microsecond, bound-bound/5)
					out.ok.Add(1)
					out.mu.Lock()
					out.ids = append(out.ids, id)
					out.mu.Unlock()
				}
			}(g)
		}
		wg.Wait()
		t.Logf("%s: %d calls returned nil, %d an error", name, out.ok.Load(), out.failed.Load())
		return &out
	}
	outcomes := map[string]*outcome{
		"pool": run("pool", func(ctx context.Context, m Message) (MessageID, error) {
			return Enqueue(ctx, pool, m, Standalone())
		}),
		"orm": run("orm", func(ctx context.Context, m Message) (MessageID, error) {
			return Enqueue(ctx, orm, m, Standalone())
		}),
		"conn": run("conn", func(ctx context.Context, m Message) (MessageID, error) {
			conn, err := pool.Conn(context.Background())
			if err != nil {
				return 0, err
			}
			defer conn.Close()
			return Enqueue(ctx, conn, m, Standalone())
		}),
	}
	if n := orphans(t, d); n != 0 {
		t.Fatalf("%d ordered messages committed without their queue entry: never delivered", n)
	}
	if orm.begun.Load() == 0 {
		t.Errorf("no Standalone enqueue on the ORM's pool went through its BeginTx")
	}
	for name, out := range outcomes {
		// Some calls must have ended each way, or the deadlines exercised nothing.
		if out.ok.Load() == 0 || out.failed.Load() == 0 {
			t.Errorf("%s: %d calls returned nil and %d an error: want some of each", name, out.ok.Load(), out.failed.Load())
		}
		for _, id := range out.ids {
			if countRows(t, d, "id = ?", int64(id)) != 1 {
				t.Errorf("%s: Enqueue returned id %d, which has no row", name, id)
			}
		}
	}

	rows := countRows(t, d, "1=1")
	c := newCalls()
	r := NewRouter()
	r.Handle("atomic_ordered", Policy{}, func(_ context.Context, p json.RawMessage, dl Delivery) error {
		c.add(dl, p)
		return nil
	})
	stop := start(t, newTestWorker(t, d.DB, r, Config{Concurrency: 8}))
	testutil.Eventually(t, time.Minute, "every committed message sent", func() bool { return countRows(t, d, "status = 'SENT'") == rows })
	stop()
	if c.total() != rows {
		t.Errorf("%d handler calls for %d messages, want one each", c.total(), rows)
	}
	for id, n := range c.n {
		if n != 1 {
			t.Errorf("message %d delivered %d times, want once", id, n)
		}
	}
	st, err := Stats(context.Background(), pool)
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	if st.Pending != 0 || st.Processing != 0 || st.HeldKeys != 0 {
		t.Errorf("Stats after the drain: pending %d, processing %d, held keys %d; want 0", st.Pending, st.Processing, st.HeldKeys)
	}
}

// A *sql.Conn outside a transaction autocommits each statement, as a pool does: Enqueue refuses
// it unless Standalone, and then writes an ordered message in a transaction of its own, leaving
// the session outside one. Inside BEGIN (or with autocommit off) the statements join the
// session's transaction, and the probe that tells them apart leaves a savepoint of the
// caller's intact.
func TestEnqueueOnAConnOutsideATransaction(t *testing.T) {
	t.Parallel()
	d := migrated(t)
	ctx := context.Background()
	conn, err := d.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	msg := func(et, key string) Message {
		return Message{EventType: et, OrderingKey: key, Payload: json.RawMessage(`{}`)}
	}
	rows := func(et string) int { return countRows(t, d, "event_type = ?", et) }

	for name, h := range map[string]DBTX{"*sql.Conn": conn, "a type wrapping *sql.Conn": connWrapper{conn}} {
		for _, key := range []string{"", "k"} {
			_, err := Enqueue(ctx, h, msg("bare", key))
			if err == nil || !strings.Contains(err.Error(), "outside a transaction, so the message would commit on its own") {
				t.Errorf("Enqueue on %s outside a transaction (ordering key %q): err = %v, want the refusal", name, key, err)
			}
		}
	}
	if n := rows("bare"); n != 0 {
		t.Fatalf("refused enqueues wrote %d rows", n)
	}

	// Standalone: committed at once, ordered ones whole, and the session left outside a
	// transaction (another connection sees the rows; a later enqueue is refused again).
	for _, key := range []string{"", "k"} {
		if _, err := Enqueue(ctx, conn, msg("standalone", key), Standalone()); err != nil {
			t.Fatalf("Enqueue on a bare *sql.Conn with Standalone (ordering key %q): %v", key, err)
		}
	}
	if n := rows("standalone"); n != 2 {
		t.Errorf("Standalone on a bare *sql.Conn: %d rows visible to another connection, want 2", n)
	}
	if n := orphans(t, d); n != 0 {
		t.Errorf("%d ordered messages without their queue entry", n)
	}
	if _, err := Enqueue(ctx, conn, msg("bare", "")); err == nil {
		t.Errorf("Enqueue after a Standalone one: accepted, so the session was left inside a transaction")
	}

	// Inside BEGIN: a savepoint of the caller's survives the probe; ROLLBACK drops everything.
	if _, err := conn.ExecContext(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "SAVEPOINT mine"); err != nil {
		t.Fatal(err)
	}
	if _, err := Enqueue(ctx, conn, msg("in_tx", "k")); err != nil {
		t.Fatalf("Enqueue on a *sql.Conn inside BEGIN: %v", err)
	}
	if _, err := conn.ExecContext(ctx, "ROLLBACK TO SAVEPOINT mine"); err != nil {
		t.Errorf("the caller's savepoint after an enqueue: %v", err)
	}
	if _, err := Enqueue(ctx, connWrapper{conn}, msg("in_tx", "")); err != nil {
		t.Fatalf("Enqueue on a wrapped *sql.Conn inside BEGIN: %v", err)
	}
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if n := rows("in_tx"); n != 0 {
		t.Errorf("BEGIN, Enqueue, ROLLBACK: %d rows, want 0", n)
	}

	// With autocommit off the session is always in a transaction: accepted, kept by COMMIT.
	if _, err := conn.ExecContext(ctx, "SET autocommit = 0"); err != nil {
		t.Fatal(err)
	}
	if _, err := Enqueue(ctx, conn, msg("autocommit_off", "k")); err != nil {
		t.Fatalf("Enqueue on a *sql.Conn with autocommit off: %v", err)
	}
	if n := rows("autocommit_off"); n != 0 {
		t.Errorf("autocommit off: %d rows visible before COMMIT, want 0", n)
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "SET autocommit = 1"); err != nil {
		t.Fatal(err)
	}
	if n := rows("autocommit_off"); n != 1 {
		t.Errorf("autocommit off, Enqueue, COMMIT: %d rows, want 1", n)
	}
}

// badBeginPool can begin transactions by a signature Enqueue cannot call.
type badBeginPool struct{ ormPool }

func (p *badBeginPool) BeginTx(context.Context) (*sql.Tx, error) { return nil, errors.New("unused") }

// A handle that can begin transactions and has no Commit is a pool, whatever its BeginTx
// returns (GORM's PrepareStmt pool returns its own interface): refused without Standalone;
// with it, an ordered message goes through the handle's BeginTx and commits whole. A BeginTx
// of another shape is an error, with nothing written.
func TestEnqueueOnAnORMPool(t *testing.T) {
	t.Parallel()
	d := migrated(t)
	ctx := context.Background()
	orm := &ormPool{db: d.DB}
	for _, key := range []string{"", "k"} {
		_, err := Enqueue(ctx, orm, Message{EventType: "orm", OrderingKey: key, Payload: json.RawMessage(`{}`)})
		if err == nil || !strings.Contains(err.Error(), "tx is *outbox.ormPool, a pool, so the message would commit on its own") {
			t.Errorf("Enqueue on an ORM's pool (ordering key %q): err = %v, want the refusal", key, err)
		}
	}
	if n := countRows(t, d, "1=1"); n != 0 {
		t.Fatalf("refused enqueues wrote %d rows", n)
	}
	for _, key := range []string{"", "k"} {
		if _, err := Enqueue(ctx, orm, Message{EventType: "orm", OrderingKey: key, Payload: json.RawMessage(`{}`)}, Standalone()); err != nil {
			t.Fatalf("Enqueue on an ORM's pool with Standalone (ordering key %q): %v", key, err)
		}
	}
	if n := orm.begun.Load(); n != 1 {
		t.Errorf("the ORM pool's BeginTx was called %d times, want once (for the ordered message only)", n)
	}
	if n := countRows(t, d, "event_type = 'orm'"); n != 2 {
		t.Errorf("%d rows, want 2", n)
	}
	if n := orphans(t, d); n != 0 {
		t.Errorf("%d ordered messages without their queue entry", n)
	}

	bad := &badBeginPool{ormPool{db: d.DB}}
	_, err := Enqueue(ctx, bad, Message{EventType: "bad", OrderingKey: "k", Payload: json.RawMessage(`{}`)}, Standalone())
	if err == nil || !strings.Contains(err.Error(), "not func(context.Context, *sql.TxOptions) (T, error)") {
		t.Errorf("Standalone on a pool whose BeginTx has another signature: err = %v, want it named", err)
	}
	if n := countRows(t, d, "event_type = 'bad'"); n != 0 {
		t.Errorf("%d rows written through a BeginTx that could not be called", n)
	}
}
