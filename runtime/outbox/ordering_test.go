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

// orderedPayload is what the ordering tests enqueue.
type orderedPayload struct {
	Key string `json:"key"`
	N   int64  `json:"n"`
}

// keyLog records, per key, the messages handled successfully, in the order handled, and fails
// the test when two handlers of one key overlap.
type keyLog struct {
	mu       sync.Mutex
	t        *testing.T
	inflight map[string]bool
	done     map[string][]int64
}

func newKeyLog(t *testing.T) *keyLog {
	return &keyLog{t: t, inflight: map[string]bool{}, done: map[string][]int64{}}
}

func (l *keyLog) enter(d Delivery) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inflight[d.OrderingKey] {
		l.t.Errorf("two handlers of ordering key %q at once (message %d)", d.OrderingKey, d.MessageID)
	}
	l.inflight[d.OrderingKey] = true
}

func (l *keyLog) leave(d Delivery, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.inflight[d.OrderingKey] = false
	if ok {
		l.done[d.OrderingKey] = append(l.done[d.OrderingKey], int64(d.MessageID))
	}
}

func (l *keyLog) total() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, v := range l.done {
		n += len(v)
	}
	return n
}

// The contract: messages of one ordering key are handled one at a time, in the order their
// transactions committed, with no gaps; different keys go on concurrently across workers.
// Several producers enqueue for a few dozen keys, the enqueue BEFORE the business row lock,
// two event types sharing keys (one ordering group), some transactions rolled back after the
// enqueue, some first attempts failing, two workers on separate pools. The true commit order
// of a key is biz_log's: each committed transaction appends its message id there under the
// business row lock, so per key the log's order is the order of commit.
func TestOrderingStressCommitOrder(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	db.MustExec(t, "CREATE TABLE biz (k VARCHAR(32) NOT NULL PRIMARY KEY, n BIGINT NOT NULL)")
	db.MustExec(t, "CREATE TABLE biz_log (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, k VARCHAR(64) NOT NULL, msg_id BIGINT NOT NULL)")
	const keys, producers, perProducer = 24, 6, 40
	for i := 0; i < keys; i++ {
		db.MustExec(t, "INSERT INTO biz (k, n) VALUES (?, 0)", fmt.Sprintf("order-%d", i))
	}

	log := newKeyLog(t)
	handler := func(_ context.Context, raw json.RawMessage, d Delivery) error {
		log.enter(d)
		time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
		// Some messages fail their first attempt: their key waits for the retry.
		fail := d.MessageID%7 == 3 && d.Attempt == 1
		log.leave(d, !fail)
		if fail {
			return errors.New("first attempt fails")
		}
		return nil
	}
	r := NewRouter()
	policy := Policy{Backoff: Backoff{Initial: 5 * time.Millisecond, Max: 20 * time.Millisecond}}
	r.Handle("order_placed", policy, handler)
	r.Handle("order_paid", policy, handler)
	cfg := Config{Concurrency: 8, PollInterval: 50 * time.Millisecond, MinPollInterval: 5 * time.Millisecond}
	stop1 := start(t, newTestWorker(t, db.Open(t), r, cfg))
	stop2 := start(t, newTestWorker(t, db.Open(t), r, cfg))

	var wg sync.WaitGroup
	var deadlocks atomic.Int64
	for p := 0; p < producers; p++ {
		pool := db.Open(t) // another process: no wakes reach the workers
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(uint64(p), 7))
			for i := 0; i < perProducer; i++ {
				key := fmt.Sprintf("order-%d", rnd.IntN(keys))
				rollback := rnd.IntN(8) == 0
				eventType := []string{"order_placed", "order_paid"}[rnd.IntN(2)]
				attempt := func() error {
					tx, err := pool.BeginTx(ctx, nil)
					if err != nil {
						return err
					}
					defer tx.Rollback()
					payload, _ := json.Marshal(orderedPayload{Key: key})
					id, err := Enqueue(ctx, tx, Message{EventType: eventType, Payload: payload, OrderingKey: "orders:" + key})
					if err != nil {
						return err
					}
					var n int64
					if err := tx.QueryRowContext(ctx, "SELECT n FROM biz WHERE k = ? FOR UPDATE", key).Scan(&n); err != nil {
						return err
					}
					if _, err := tx.ExecContext(ctx, "UPDATE biz SET n = n + 1 WHERE k = ?", key); err != nil {
						return err
					}
					if _, err := tx.ExecContext(ctx, "INSERT INTO biz_log (k, msg_id) VALUES (?, ?)", "orders:"+key, int64(id)); err != nil {
						return err
					}
					if rollback {
						return tx.Rollback()
					}
					return tx.Commit()
				}
				err := attempt()
				// Under this load InnoDB now and then rolls a producer back as a deadlock victim
				// (error 1213, seen about once in 12 runs, on MariaDB 10.11 and 11.8): the key
				// locks of concurrent enqueues, the business row lock and the workers' writes
				// to the ordering queue can form a cycle. An application retries the
				// transaction, as this producer does; what is checked is the order of the
				// transactions that committed.
				for isDeadlock(err) {
					deadlocks.Add(1)
					err = attempt()
				}
				if err != nil {
					t.Errorf("producer %d: %v", p, err)
					return
				}
			}
		}(p)
	}
	wg.Wait()
	want := map[string][]int64{}
	rows, err := db.Query("SELECT k, msg_id FROM biz_log ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for rows.Next() {
		var k string
		var id int64
		if err := rows.Scan(&k, &id); err != nil {
			t.Fatal(err)
		}
		want[k] = append(want[k], id)
		total++
	}
	rows.Close()
	testutil.Eventually(t, 60*time.Second, fmt.Sprintf("%d committed messages handled", total), func() bool { return log.total() >= total })
	stop1()
	stop2()

	log.mu.Lock()
	defer log.mu.Unlock()
	idsDisagree := false
	for key, ids := range want {
		if got := fmt.Sprint(log.done[key]); got != fmt.Sprint(ids) {
			t.Errorf("key %s: handled %s, want the commit order %v", key, got, ids)
		}
		for i := 1; i < len(ids); i++ {
			if ids[i] < ids[i-1] {
				idsDisagree = true
			}
		}
	}
	t.Logf("%d messages over %d keys (%d deadlock victims retried); ids disagreed with commit order within a key: %v", total, len(want), deadlocks.Load(), idsDisagree)
	if n := countRows(t, db, "status <> 'SENT'"); n != 0 {
		t.Errorf("%d messages not SENT", n)
	}
	var queued int
	if err := db.QueryRow("SELECT COUNT(*) FROM outbox_ordering_queue").Scan(&queued); err != nil || queued != 0 {
		t.Errorf("ordering queue holds %d entries after every message was sent, want 0 (%v)", queued, err)
	}
}

// enqueueOrdered commits one ordered message.
func enqueueOrdered(t *testing.T, db *sql.DB, eventType, key string, n int64, opts ...EnqueueOption) MessageID {
	t.Helper()
	var id MessageID
	err := InTx(context.Background(), db, func(tx *sql.Tx) error {
		payload, _ := json.Marshal(orderedPayload{Key: key, N: n})
		var err error
		id, err = Enqueue(context.Background(), tx, Message{EventType: eventType, Payload: payload, OrderingKey: key, MaxAttempts: 1}, opts...)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// A FAILED head holds its key while other keys and unordered events go on; Stats shows the held
// key and its head; Retry releases the key, in order; a purged FAILED head releases it too.
func TestOrderingFailedHeadHoldsItsKey(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	var mu sync.Mutex
	var order []string
	failing := map[int64]bool{1: true}
	r := NewRouter()
	handle := func(_ context.Context, raw json.RawMessage, d Delivery) error {
		var p orderedPayload
		_ = json.Unmarshal(raw, &p)
		mu.Lock()
		defer mu.Unlock()
		if (p.Key == "held" || p.Key == "purged") && failing[p.N] {
			return errors.New("provider down")
		}
		order = append(order, fmt.Sprintf("%s/%d", p.Key, p.N))
		return nil
	}
	r.Handle("ordered", Policy{MaxAttempts: 1}, handle)
	// A second type in the key's group: its message waits behind the held key but does not hold it.
	r.Handle("ordered_tail", Policy{MaxAttempts: 1}, handle)
	r.Handle("plain", Policy{}, func(context.Context, json.RawMessage, Delivery) error { return nil })
	w := newTestWorker(t, db.DB, r, Config{})
	sig := signals(t, w)
	stop := start(t, w)
	head := enqueueOrdered(t, db.DB, "ordered", "held", 1)
	testutil.Eventually(t, 10*time.Second, "the head FAILED", func() bool { return statusOf(t, db, head) == "FAILED" })
	enqueueOrdered(t, db.DB, "ordered", "held", 2)
	enqueueOrdered(t, db.DB, "ordered_tail", "held", 3)
	enqueueOrdered(t, db.DB, "ordered", "free", 1)
	plain := enqueueN(t, db.DB, "plain", 3)
	testutil.Eventually(t, 10*time.Second, "the other key and the unordered messages handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(order) == 1 && countRows(t, db, "event_type = 'plain' AND status = 'SENT'") == len(plain)
	})
	sig.awaitClaims(3) // claims enough for a wrongly released key to be claimed
	mu.Lock()
	if strings.Join(order, ",") != "free/1" {
		t.Errorf("handled %v while the key's head was FAILED, want only free/1", order)
	}
	mu.Unlock()

	s, err := Stats(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if s.HeldKeys != 1 || len(s.Held) != 1 || s.Held[0].OrderingKey != "held" || s.Held[0].Head != head ||
		s.Held[0].HeadStatus != StatusFailed || s.Held[0].HeadEventType != "ordered" || s.Held[0].Waiting != 2 || s.OldestHeld <= 0 {
		t.Errorf("Stats held keys = %d %+v (oldest %v), want 1: held, head %d FAILED of type ordered, 2 waiting", s.HeldKeys, s.Held, s.OldestHeld, head)
	}
	// The key is counted under its head's type only, though a message of ordered_tail waits in it.
	if s.ByType["ordered"].Held != 1 || s.ByType["ordered_tail"].Held != 0 || s.ByType["ordered_tail"].Pending != 1 {
		t.Errorf("ByType held: ordered %+v, ordered_tail %+v; want Held 1 for ordered (the head's type), 0 for ordered_tail (1 pending behind it)",
			s.ByType["ordered"], s.ByType["ordered_tail"])
	}
	if s.ByType["ordered"].Due != 0 {
		t.Errorf("Due = %d for messages waiting behind a FAILED head, want 0 (they cannot be claimed)", s.ByType["ordered"].Due)
	}

	mu.Lock()
	failing[1] = false
	mu.Unlock()
	if n, err := Retry(ctx, db, Filter{IDs: []MessageID{head}}); err != nil || n != 1 {
		t.Fatalf("Retry = %d, %v", n, err)
	}
	testutil.Eventually(t, 10*time.Second, "the key released in order", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(order) == 4
	})
	stop()
	if got := strings.Join(order, ","); got != "free/1,held/1,held/2,held/3" {
		t.Errorf("handled %s, want free/1,held/1,held/2,held/3", got)
	}

	// Purging a FAILED head releases its key too.
	mu.Lock()
	failing[1], order = true, nil
	mu.Unlock()
	stop = start(t, newTestWorker(t, db.DB, r, Config{}))
	head = enqueueOrdered(t, db.DB, "ordered", "purged", 1)
	testutil.Eventually(t, 10*time.Second, "the head FAILED", func() bool { return statusOf(t, db, head) == "FAILED" })
	enqueueOrdered(t, db.DB, "ordered", "purged", 2)
	if n, err := Purge(ctx, db.DB, PurgeFilter{Status: StatusFailed, IDs: []MessageID{head}}); err != nil || n != 1 {
		t.Fatalf("Purge = %d, %v", n, err)
	}
	testutil.Eventually(t, 10*time.Second, "the successor handled after the purge", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(order) == 1
	})
	stop()
}

// A delayed head holds its key: the message after it waits for it.
func TestOrderingDelayedHeadHoldsItsKey(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	var mu sync.Mutex
	var order []int64
	r := NewRouter()
	r.Handle("delayed", Policy{}, func(_ context.Context, raw json.RawMessage, d Delivery) error {
		var p orderedPayload
		_ = json.Unmarshal(raw, &p)
		mu.Lock()
		order = append(order, p.N)
		mu.Unlock()
		return nil
	})
	stop := start(t, newTestWorker(t, db.DB, r, Config{}))
	defer stop()
	enqueueOrdered(t, db.DB, "delayed", "k", 1, Delay(400*time.Millisecond))
	enqueueOrdered(t, db.DB, "delayed", "k", 2)
	testutil.Eventually(t, 10*time.Second, "both handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(order) == 2
	})
	mu.Lock()
	defer mu.Unlock()
	if order[0] != 1 || order[1] != 2 {
		t.Errorf("handled %v, want [1 2]: the delayed head first", order)
	}
}

// A rolled-back enqueue gives its place back: the next commit of the key takes it, and nothing
// waits for a message that never existed.
func TestOrderingRollbackLeavesNoGap(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Enqueue(ctx, tx, Message{EventType: "rb", Payload: json.RawMessage(`{}`), OrderingKey: "k"}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	id := enqueueOrdered(t, db.DB, "rb", "k", 1)
	var seq int64
	if err := db.QueryRow("SELECT ordering_seq FROM outbox_messages WHERE id = ?", int64(id)).Scan(&seq); err != nil || seq != 1 {
		t.Errorf("seq after a rolled-back enqueue = %d (%v), want 1", seq, err)
	}
	r := NewRouter()
	r.Handle("rb", Policy{}, func(context.Context, json.RawMessage, Delivery) error { return nil })
	stop := start(t, newTestWorker(t, db.DB, r, Config{}))
	defer stop()
	testutil.Eventually(t, 10*time.Second, "delivered", func() bool { return statusOf(t, db, id) == "SENT" })
}

// A head whose worker died (claimed, never recorded) keeps its key until it is reclaimed and
// handled: its successor is not handled before it.
func TestOrderingReclaimedHeadKeepsItsPlace(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	var mu sync.Mutex
	var order []int64
	r := NewRouter()
	r.Handle("rc", Policy{Timeout: 200 * time.Millisecond}, func(_ context.Context, raw json.RawMessage, d Delivery) error {
		var p orderedPayload
		_ = json.Unmarshal(raw, &p)
		mu.Lock()
		order = append(order, p.N)
		mu.Unlock()
		return nil
	})
	var head MessageID
	err := InTx(ctx, db.DB, func(tx *sql.Tx) error {
		var err error
		head, err = Enqueue(ctx, tx, Message{EventType: "rc", Payload: json.RawMessage(`{"key":"k","n":1}`), OrderingKey: "k"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	dead := newTestWorker(t, db.DB, r, Config{StaleAfter: 500 * time.Millisecond})
	got, _, err := dead.claim(ctx, 10, claimPos{})
	if err != nil || len(got) != 1 || got[0].id != head {
		t.Fatalf("dead worker's claim = %+v, %v; want the head", got, err)
	}
	enqueueOrdered(t, db.DB, "rc", "k", 2)
	stop := start(t, newTestWorker(t, db.DB, r, Config{StaleAfter: 500 * time.Millisecond, ReclaimInterval: 50 * time.Millisecond}))
	defer stop()
	testutil.Eventually(t, 10*time.Second, "both handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(order) == 2
	})
	mu.Lock()
	defer mu.Unlock()
	if order[0] != 1 || order[1] != 2 {
		t.Errorf("handled %v, want [1 2]: the reclaimed head before its successor", order)
	}
}

// Different keys do not wait for each other: a slow message of one key does not hold another.
func TestOrderingKeysRunConcurrently(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	release := make(chan struct{})
	var once sync.Once
	bDone := make(chan struct{})
	r := NewRouter()
	r.Handle("conc", Policy{}, func(_ context.Context, raw json.RawMessage, d Delivery) error {
		var p orderedPayload
		_ = json.Unmarshal(raw, &p)
		if p.Key == "a" {
			select {
			case <-release:
			case <-time.After(10 * time.Second):
				return errors.New("key b never ran while key a was busy")
			}
			return nil
		}
		once.Do(func() { close(bDone) })
		return nil
	})
	stop := start(t, newTestWorker(t, db.DB, r, Config{Concurrency: 4}))
	defer stop()
	a := enqueueOrdered(t, db.DB, "conc", "a", 1)
	enqueueOrdered(t, db.DB, "conc", "b", 1)
	select {
	case <-bDone:
	case <-time.After(10 * time.Second):
		t.Fatal("key b was not handled while key a's message was in its handler")
	}
	close(release)
	testutil.Eventually(t, 10*time.Second, "key a done", func() bool { return statusOf(t, db, a) == "SENT" })
}
