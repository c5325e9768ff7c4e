package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/outboxgen/outboxgen/internal/testutil"
)

// lockErrors counts the lock errors (1213 deadlock, 1205 lock wait timeout) that business
// transactions got, by the statement that got them.
type lockErrors struct {
	mu     sync.Mutex
	counts map[string]int // "<statement> <error number>"
	logged int
}

func (l *lockErrors) add(stmt string, number uint16) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.counts[fmt.Sprintf("%s %d", stmt, number)]++
}

func (l *lockErrors) total() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, c := range l.counts {
		n += c
	}
	return n
}

// latestDeadlock is the LATEST DETECTED DEADLOCK section of SHOW ENGINE INNODB STATUS: the two
// transactions of the cycle, the locks each held and waited for, and the victim. The section is
// the server's, so it may show another database's deadlock when tests run side by side.
func latestDeadlock(db *sql.DB) string {
	var typ, name, status string
	if err := db.QueryRow("SHOW ENGINE INNODB STATUS").Scan(&typ, &name, &status); err != nil {
		return "SHOW ENGINE INNODB STATUS: " + err.Error()
	}
	const head = "LATEST DETECTED DEADLOCK"
	i := strings.Index(status, head)
	if i < 0 {
		return "no deadlock section"
	}
	s := status[i:]
	if j := strings.Index(s, "\nTRANSACTIONS\n"); j > 0 {
		s = s[:j]
	}
	return s
}

// stressDuration is how long the deadlock stress runs: a few seconds, or
// OUTBOX_DEADLOCK_STRESS (a Go duration) to investigate.
func stressDuration(t *testing.T) time.Duration {
	v := os.Getenv("OUTBOX_DEADLOCK_STRESS")
	if v == "" {
		return 4 * time.Second
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("OUTBOX_DEADLOCK_STRESS=%q: %v", v, err)
	}
	return d
}

// The outbox's own statements never make a business transaction a deadlock victim, for keys
// whose counter exists. A new key's counter can join a cycle that no lock of the runtime
// prevents: docs/design.md "The key's named lock" describes it, and the test tagged
// deadlockrepro reproduces it. So every key here gets its first message before the producers
// start, committed. Producers of ordered events, as an application writes them: each
// transaction enqueues an event of its order's key (a few orders at a time, so keys repeat),
// pauses, updates its order's row under a row lock, and commits or, one in five, rolls back. Two workers drain beside them, their handlers failing now and then (a retry writes a
// result that is not SENT, and the key waits for it). Every lock error a business statement
// gets is counted by statement; the target is none at all. Each deadlock's cycle is logged
// from SHOW ENGINE INNODB STATUS.
func TestOrderingEnqueueNeverDeadlockVictim(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	// Producers pick among window consecutive orders; the window slides by one order every
	// slideEvery transactions, so keys repeat while a new one appears now and then.
	const orders, window, slideEvery, producers = 4000, 3, 16, 8
	db.MustExec(t, "CREATE TABLE orders (id INT NOT NULL PRIMARY KEY, n INT NOT NULL)")
	var rows strings.Builder
	for k := 0; k < orders; k++ {
		if k > 0 {
			rows.WriteString(",")
		}
		fmt.Fprintf(&rows, "(%d,0)", k)
	}
	db.MustExec(t, "INSERT INTO orders (id, n) VALUES "+rows.String())
	first := make([]Message, orders)
	for k := range first {
		first[k] = Message{EventType: "order_changed", Payload: []byte(`{}`), OrderingKey: fmt.Sprintf("order-%d", k)}
	}
	if err := InTx(ctx, db.DB, func(tx *sql.Tx) error {
		_, err := EnqueueMany(ctx, tx, first)
		return err
	}); err != nil {
		t.Fatal(err)
	}

	var handled atomic.Int64
	handler := func(_ context.Context, _ json.RawMessage, d Delivery) error {
		if rand.IntN(6) == 0 && d.Attempt < 5 {
			return errors.New("the downstream said no this time")
		}
		handled.Add(1)
		return nil
	}
	r := NewRouter()
	r.Handle("order_changed", Policy{Backoff: Backoff{Initial: time.Millisecond, Max: 5 * time.Millisecond}}, handler)
	cfg := Config{Concurrency: 8, PollInterval: 20 * time.Millisecond, MinPollInterval: 2 * time.Millisecond}
	stop1 := start(t, newTestWorker(t, db.Open(t), r, cfg))
	stop2 := start(t, newTestWorker(t, db.Open(t), r, cfg))

	errs := &lockErrors{counts: map[string]int{}}
	admin := db.Open(t)
	deadline := time.Now().Add(stressDuration(t))
	var started, committed, rolledBack atomic.Int64
	var wg sync.WaitGroup
	for p := 0; p < producers; p++ {
		pool := db.Open(t)
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(uint64(p), uint64(time.Now().UnixNano())))
			for time.Now().Before(deadline) {
				k := (int(started.Add(1))/slideEvery + rnd.IntN(window)) % orders
				stmt, err := businessTx(ctx, pool, k, rnd)
				var me *mysql.MySQLError
				switch {
				case err == nil && stmt == "rollback":
					rolledBack.Add(1)
				case err == nil:
					committed.Add(1)
				case errors.As(err, &me) && (me.Number == 1213 || me.Number == 1205):
					errs.add(stmt, me.Number)
					errs.mu.Lock()
					if me.Number == 1213 && errs.logged < 3 {
						errs.logged++
						t.Logf("producer %d: %s: %v; the server's latest deadlock:\n%s", p, stmt, err, latestDeadlock(admin))
					}
					errs.mu.Unlock()
				default:
					t.Errorf("producer %d: %s: %v", p, stmt, err)
					return
				}
			}
		}(p)
	}
	wg.Wait()
	// The workers keep up: every committed message is sent, so the results were written.
	testutil.Eventually(t, 60*time.Second, fmt.Sprintf("%d committed messages sent", orders+committed.Load()), func() bool {
		return countRows(t, db, "status = 'SENT'") >= orders+int(committed.Load())
	})
	stop1()
	stop2()
	t.Logf("%d business transactions committed, %d rolled back, %d messages handled; lock errors in business transactions: %v",
		committed.Load(), rolledBack.Load(), handled.Load(), errs.counts)
	if n := errs.total(); n != 0 {
		t.Errorf("%d business transactions got a lock error from the outbox's locks, want none: %v", n, errs.counts)
	}
	if n := countRows(t, db, "1=1"); n != orders+int(committed.Load()) {
		t.Errorf("%d messages, want one per key and one per committed transaction (%d + %d)", n, orders, committed.Load())
	}
}

// businessTx is one producer transaction: the enqueue, a pause, the order's row update, then a
// commit or (one in five) a rollback. stmt names the statement that failed, or says how the
// transaction ended.
func businessTx(ctx context.Context, db *sql.DB, k int, rnd *rand.Rand) (stmt string, err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return "begin", err
	}
	defer tx.Rollback()
	payload := fmt.Appendf(nil, `{"order":%d}`, k)
	if _, err := Enqueue(ctx, tx, Message{EventType: "order_changed", Payload: payload, OrderingKey: fmt.Sprintf("order-%d", k)}); err != nil {
		return "enqueue", err
	}
	time.Sleep(time.Duration(rnd.IntN(3000)) * time.Microsecond)
	if _, err := tx.ExecContext(ctx, "UPDATE orders SET n = n + 1 WHERE id = ?", k); err != nil {
		return "update", err
	}
	if rnd.IntN(5) == 0 {
		return "rollback", tx.Rollback()
	}
	return "commit", tx.Commit()
}

// Recording ordered messages SENT never waits for a business transaction that is still open:
// the queue entries of the sent messages are deleted by their primary key. A DELETE by message
// id scans the whole queue while it is small and waits at the open enqueue's entry, holding
// locks that stop every other enqueue meanwhile. Twenty keys each with a sent message, and an
// open transaction that enqueued for another key: the write takes milliseconds, not as long as
// that transaction stays open.
func TestOrderingSentWriteDoesNotWaitForAnOpenEnqueue(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	for i := 0; i < 30; i++ {
		enqueueOrdered(t, db.DB, "order_changed", fmt.Sprintf("order-%02d", i), int64(i))
	}
	open, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer open.Rollback()
	if _, err := Enqueue(ctx, open, Message{EventType: "order_changed", Payload: []byte(`{}`), OrderingKey: "order-15"}); err != nil {
		t.Fatal(err)
	}

	r := NewRouter()
	r.Handle("order_changed", Policy{}, func(context.Context, json.RawMessage, Delivery) error { return nil })
	w := newTestWorker(t, db.DB, r, Config{})
	got, _, err := w.claim(ctx, 20, claimPos{})
	if err != nil || len(got) != 20 {
		t.Fatalf("claim = %d rows, %v; want 20", len(got), err)
	}
	batch := make([]result, len(got))
	for i, c := range got {
		batch[i] = result{id: c.id, eventType: c.eventType, token: c.token, outcome: OutcomeSent,
			orderingKey: c.orderingKey, orderingSeq: c.orderingSeq}
	}
	wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	start := time.Now()
	written, refused, err := w.writeResultsTx(wctx, batch)
	if took := time.Since(start); err != nil || written != 20 || refused != 0 || took > 2*time.Second {
		t.Fatalf("SENT write of 20 ordered messages beside an open enqueue = %d written, %d refused, %v, in %v; want 20, 0, nil, at once", written, refused, err, took)
	}
	if n := countRows(t, db, "status = 'SENT'"); n != 20 {
		t.Errorf("%d messages SENT, want 20", n)
	}
	var queued int
	if err := db.QueryRow("SELECT COUNT(*) FROM outbox_ordering_queue").Scan(&queued); err != nil || queued != 10 {
		t.Errorf("ordering queue holds %d committed entries, want the 10 not sent (%v)", queued, err)
	}
}

// A transaction that enqueues two events of one key still gets through when another session,
// waiting for that key's row, holds the key's named lock: the named lock waits a bounded time
// and the counter statement then runs without it (the row is this transaction's own, so it
// does not wait). The other session takes the next seq once the first commits.
func TestOrderingSameKeyTwiceBesideAWaiter(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	enqueue := func(tx *sql.Tx) (MessageID, error) {
		return Enqueue(ctx, tx, Message{EventType: "order_changed", Payload: []byte(`{}`), OrderingKey: "order-1"})
	}
	first, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Rollback()
	if _, err := enqueue(first); err != nil {
		t.Fatal(err)
	}

	waiter := db.Open(t)
	done := make(chan error, 1)
	go func() {
		done <- InTx(ctx, waiter, func(tx *sql.Tx) error { _, err := enqueue(tx); return err })
	}()
	// The waiter holds the key's named lock while it waits for the key's row.
	testutil.Eventually(t, 10*time.Second, "the waiter holding the key's named lock", func() bool {
		var holder sql.NullInt64
		err := db.QueryRow("SELECT IS_USED_LOCK(CONCAT('outboxgen.key.', LEFT(SHA2(CONCAT(DATABASE(), '/', ?), 256), 46)))", "order-1").Scan(&holder)
		return err == nil && holder.Valid
	})

	start := time.Now()
	if _, err := enqueue(first); err != nil {
		t.Fatalf("second enqueue of the key in one transaction: %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("second enqueue of the key took %v beside a waiter, want about a second at most", took)
	}
	if err := first.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the waiting transaction: %v", err)
	}
	var seqs []int64
	rows, err := db.Query("SELECT ordering_seq FROM outbox_messages ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var s int64
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, s)
	}
	if fmt.Sprint(seqs) != "[1 2 3]" {
		t.Errorf("seqs by id = %v, want [1 2 3] (the waiter's message last)", seqs)
	}
}
