package outbox

import (
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/internal/faultdriver"
	"github.com/outboxgen/outboxgen/internal/testutil"
)

// manyMsgs builds n messages of three event types, message i with payload {"i":i} and key k-i.
func manyMsgs(n int) []Message {
	ms := make([]Message, n)
	for i := range ms {
		ms[i] = Message{EventType: fmt.Sprintf("many_%d", i%3), Payload: []byte(fmt.Sprintf(`{"i":%d}`, i)), IdempotencyKey: fmt.Sprintf("k-%d", i)}
	}
	return ms
}

// checkManyRows fails unless ids[i] is the row of ms[i], for every i, and the ids rise.
func checkManyRows(t *testing.T, db DBTX, ms []Message, ids []MessageID) {
	t.Helper()
	if len(ids) != len(ms) {
		t.Fatalf("%d ids for %d messages", len(ids), len(ms))
	}
	type stored struct{ typ, payload, key string }
	got := map[MessageID]stored{}
	rows, err := db.QueryContext(context.Background(), "SELECT id, event_type, payload, idempotency_key FROM outbox_messages WHERE id >= ?", int64(ids[0]))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id MessageID
		var s stored
		if err := rows.Scan(&id, &s.typ, &s.payload, &s.key); err != nil {
			t.Fatal(err)
		}
		got[id] = s
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	bad := 0
	for i, m := range ms {
		s, ok := got[ids[i]]
		if !ok || s.typ != m.EventType || s.payload != string(m.Payload) || s.key != m.IdempotencyKey {
			if bad++; bad <= 5 {
				t.Errorf("ms[%d] has id %d holding %+v (found %v), want (%s, %s, %s)", i, ids[i], s, ok, m.EventType, m.Payload, m.IdempotencyKey)
			}
		}
		if i > 0 && ids[i] <= ids[i-1] {
			if bad++; bad <= 5 {
				t.Errorf("ids[%d] = %d after ids[%d] = %d: not in input order", i, ids[i], i-1, ids[i-1])
			}
		}
	}
}

// An invalid message anywhere is found before the first statement: the error names it by its
// index and nothing reaches the server.
func TestEnqueueManyChecksEveryMessageFirst(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	bad := []struct {
		name string
		m    Message
		want string
	}{
		{"payload", Message{EventType: "x", Payload: []byte(`{"a":`)}, "not valid JSON"},
		{"type", Message{Payload: []byte(`{}`)}, "empty EventType"},
		{"attempts", Message{EventType: "x", Payload: []byte(`{}`), MaxAttempts: -1}, "MaxAttempts"},
		{"key", Message{EventType: "x", Payload: []byte(`{}`), OrderingKey: "\xff"}, "OrderingKey"},
	}
	for _, b := range bad {
		t.Run(b.name, func(t *testing.T) {
			ms := manyMsgs(600)
			ms[517] = b.m
			sqlTx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer sqlTx.Rollback()
			rec := &recordingTx{Tx: sqlTx}
			ids, err := EnqueueMany(ctx, rec, ms)
			if err == nil || !strings.Contains(err.Error(), "ms[517]") || !strings.Contains(err.Error(), b.want) {
				t.Fatalf("EnqueueMany = %v, %v; want an error naming ms[517] and %q", ids, err, b.want)
			}
			if texts := rec.take(); len(texts) != 0 {
				t.Errorf("statements sent before the check failed: %d, first %.80q", len(texts), texts[0])
			}
			if n := countRows(t, sqlTx, "1=1"); n != 0 {
				t.Errorf("%d rows written", n)
			}
		})
	}
}

// The ids come back in input order and each is its message's row: under a session increment of
// 1 and of 3, while another session enqueues between the chunks, with mixed event types.
func TestEnqueueManyIDsInInputOrder(t *testing.T) {
	t.Parallel()
	for _, inc := range []int{1, 3} {
		t.Run(fmt.Sprintf("increment_%d", inc), func(t *testing.T) {
			t.Parallel()
			db := migrated(t)
			ctx := context.Background()
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			go func() { // a concurrent writer whose ids may fall between and among ours
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					if _, err := Enqueue(ctx, db.DB, Message{EventType: "other", Payload: []byte(`{}`)}, Standalone()); err != nil {
						t.Error(err)
						return
					}
				}
			}()
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.ExecContext(ctx, fmt.Sprintf("SET SESSION auto_increment_increment = %d", inc)); err != nil {
				t.Fatal(err)
			}
			ms := manyMsgs(5000)
			ids, err := EnqueueMany(ctx, tx, ms)
			if err != nil {
				t.Fatal(err)
			}
			checkManyRows(t, tx, ms, ids)
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			close(stop)
			wg.Wait()
			checkManyRows(t, db, ms, ids)
			if inc > 1 && (ids[1]-ids[0])%MessageID(inc) != 0 {
				t.Errorf("ids %d, %d under increment %d", ids[0], ids[1], inc)
			}
		})
	}
}

// 30,000 messages, past the 65,535 placeholders one statement may have (9 a row), go in a few
// statements of sizes from the fixed set, through database/sql's own transaction (inline) and
// through an ORM-like wrapper (placeholders).
func TestEnqueueManyChunksUnderThePlaceholderLimit(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	const n = 30000
	// 7 x 4096 + 2 x 512 + 4 x 64 + 6 x 8
	const wantInserts = 19
	t.Run("sql.Tx", func(t *testing.T) {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		before := sessionStatus(t, tx, "Com_insert")
		ms := manyMsgs(n)
		ids, err := EnqueueMany(ctx, tx, ms)
		if err != nil {
			t.Fatal(err)
		}
		if got := sessionStatus(t, tx, "Com_insert") - before; got != wantInserts {
			t.Errorf("%d INSERT statements, want %d", got, wantInserts)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		checkManyRows(t, db, ms, ids)
	})
	t.Run("wrapper", func(t *testing.T) {
		sqlTx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer sqlTx.Rollback()
		rec := &recordingTx{Tx: sqlTx}
		ms := manyMsgs(n)
		ids, err := EnqueueMany(ctx, rec, ms)
		if err != nil {
			t.Fatal(err)
		}
		sizes := map[int]int{}
		for _, text := range rec.take() {
			if strings.Contains(text, "INSERT INTO outbox_messages") {
				sizes[strings.Count(text, "?")/6]++ // 6 placeholders a row without delay or key
			}
		}
		want := map[int]int{4096: 7, 512: 2, 64: 4, 8: 6}
		if fmt.Sprint(sizes) != fmt.Sprint(want) {
			t.Errorf("statements by rows: %v, want %v", sizes, want)
		}
		if err := sqlTx.Commit(); err != nil {
			t.Fatal(err)
		}
		checkManyRows(t, db, ms, ids)
	})
}

// Through a handle that may cache a statement per SQL text, the texts of any number of calls of
// any sizes and shapes are a small fixed set: calls of 4097 and 585 messages use every chunk
// size, and later calls of other sizes add no text.
func TestEnqueueManySQLTextsThroughWrapperAreBounded(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	texts := map[string]bool{}
	call := func(n, shape int) (added int) {
		sqlTx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		rec := &recordingTx{Tx: sqlTx}
		ms := manyMsgs(n)
		var opts []EnqueueOption
		switch shape {
		case 1:
			opts = append(opts, Delay(time.Hour), Header("h", fmt.Sprint(n)))
		case 2:
			for i := range ms {
				ms[i].OrderingKey = fmt.Sprintf("key-%d-%d", n, i%5)
			}
		}
		ids, err := EnqueueMany(ctx, rec, ms, opts...)
		if err != nil {
			t.Fatal(err)
		}
		checkManyRows(t, sqlTx, ms, ids)
		if err := sqlTx.Commit(); err != nil {
			t.Fatal(err)
		}
		for _, s := range rec.take() {
			if !texts[s] {
				texts[s] = true
				added++
			}
		}
		return added
	}
	for shape := range 3 {
		for _, n := range []int{4097, 585} {
			call(n, shape)
		}
	}
	// 3 INSERT shapes (plain, full, queue) of 5 sizes, the settings, the read-back, the key
	// lock, its release and the key's counter.
	if len(texts) > 3*5+5 {
		t.Errorf("%d distinct SQL texts", len(texts))
	}
	for shape := range 3 {
		for _, n := range []int{2, 7, 100, 777, 1500} {
			if added := call(n, shape); added != 0 {
				t.Errorf("a call of %d messages (shape %d) sent %d new SQL texts", n, shape, added)
			}
		}
	}
}

// A chunk that fails after the server wrote it leaves nothing: on a pool with Standalone the
// call's own transaction rolls back, and on the caller's transaction the caller's rollback
// drops every chunk before it.
func TestEnqueueManyIsAtomic(t *testing.T) {
	t.Parallel()
	d, inj, db := faultyDB(t)
	ctx := context.Background()
	ms := manyMsgs(1000)
	ms[700].Payload = []byte(`{"boom":700}`)
	rule := inj.Add(faultdriver.Rule{Match: hex.EncodeToString([]byte(`"boom"`)), Err: errors.New("injected: connection lost"), Passthrough: true})
	if _, err := EnqueueMany(ctx, db, ms, Standalone()); err == nil || !strings.Contains(err.Error(), "injected") {
		t.Fatalf("Standalone: err = %v, want the injected one", err)
	}
	if rule.Hits() != 1 {
		t.Fatalf("the failing chunk ran %d times, want once", rule.Hits())
	}
	if n := countRows(t, d, "1=1"); n != 0 {
		t.Errorf("Standalone: %d rows after the failed call, want 0", n)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := EnqueueMany(ctx, tx, ms); err == nil {
		t.Fatal("on a transaction: no error")
	}
	if n := countRows(t, tx, "1=1"); n < 512 {
		t.Errorf("the chunks before the failing one wrote %d rows; the test needs them written", n)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	rule.Remove()
	tx, err = db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := EnqueueMany(ctx, tx, ms); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if n := countRows(t, d, "1=1"); n != 0 {
		t.Errorf("%d rows after the caller's rollbacks, want 0", n)
	}
}

// Ordered messages take their key's seqs in input order, after what the key already had, with
// a queue entry each. Two calls on the same keys in opposite orders do not deadlock.
func TestEnqueueManyOrderedKeepsInputOrderPerKey(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	if err := InTx(ctx, db.DB, func(tx *sql.Tx) error {
		_, err := Enqueue(ctx, tx, Message{EventType: "o", Payload: []byte(`{}`), OrderingKey: "k2"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	keys := []string{"k0", "k1", "k2", "k3", "k4"}
	build := func(reverse bool) []Message {
		ms := make([]Message, 600)
		for i := range ms {
			k := keys[(i*7)%len(keys)]
			if reverse {
				k = keys[len(keys)-1-(i*7)%len(keys)]
			}
			ms[i] = Message{EventType: "o", Payload: []byte(fmt.Sprintf(`{"i":%d}`, i)), OrderingKey: k}
			if i%50 == 0 {
				ms[i].OrderingKey = "" // unordered ones among them
			}
		}
		return ms
	}
	// Rounds of four calls at once, two in each key order.
	const rounds, perRound = 5, 4
	calls := make([][]Message, rounds*perRound)
	got := make([][]MessageID, len(calls))
	for c := range calls {
		calls[c] = build(c%2 == 1)
	}
	for round := range rounds {
		var wg sync.WaitGroup
		base := round * perRound
		for c := range perRound {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := InTx(ctx, db.DB, func(tx *sql.Tx) error {
					var err error
					got[base+c], err = EnqueueMany(ctx, tx, calls[base+c])
					return err
				})
				if err != nil {
					t.Errorf("call %d: %v", base+c, err)
				}
			}()
		}
		wg.Wait()
	}
	if t.Failed() {
		return
	}
	seqOf := map[MessageID]int64{}
	rows, err := db.QueryContext(ctx, "SELECT id, ordering_seq FROM outbox_messages WHERE ordering_seq IS NOT NULL")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id MessageID
		var seq int64
		if err := rows.Scan(&id, &seq); err != nil {
			t.Fatal(err)
		}
		seqOf[id] = seq
	}
	rows.Close()
	for c, ms := range calls {
		checkManyRows(t, db, ms, got[c])
		last := map[string]int64{}
		for i, m := range ms {
			if m.OrderingKey == "" {
				continue
			}
			seq := seqOf[got[c][i]]
			if prev, ok := last[m.OrderingKey]; ok && seq != prev+1 {
				t.Errorf("call %d ms[%d] of %s has seq %d after %d", c, i, m.OrderingKey, seq, prev)
			}
			last[m.OrderingKey] = seq
		}
	}
	var maxSeq int64
	if err := db.QueryRowContext(ctx, "SELECT last_seq FROM outbox_ordering WHERE ordering_key = 'k2'").Scan(&maxSeq); err != nil {
		t.Fatal(err)
	}
	if n := countRows(t, db, "ordering_key = 'k2'"); maxSeq != int64(n) {
		t.Errorf("k2's counter is %d for %d messages", maxSeq, n)
	}
	if n := orphans(t, db); n != 0 {
		t.Errorf("%d ordered messages without a queue entry", n)
	}
	var queued int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM outbox_ordering_queue").Scan(&queued); err != nil {
		t.Fatal(err)
	}
	if want := countRows(t, db, "ordering_key IS NOT NULL"); queued != want {
		t.Errorf("%d queue entries for %d ordered messages", queued, want)
	}
}

// A pool, a pool of an ORM or a *sql.Conn outside a transaction is refused without Standalone,
// with nothing written; with it the messages commit together in a transaction of the call's own.
func TestEnqueueManyStandalone(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	orm := &ormPool{db: db.DB}
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, h := range []struct {
		name string
		db   DBTX
	}{{"sql.DB", db.DB}, {"orm", orm}, {"conn", conn}} {
		t.Run(h.name, func(t *testing.T) {
			before := countRows(t, db, "1=1")
			if _, err := EnqueueMany(ctx, h.db, manyMsgs(10)); err == nil || !strings.Contains(err.Error(), "Standalone") {
				t.Fatalf("without Standalone: err = %v, want a refusal naming Standalone", err)
			}
			if n := countRows(t, db, "1=1"); n != before {
				t.Fatalf("the refused call wrote %d rows", n-before)
			}
			ms := manyMsgs(100)
			for i := range ms {
				ms[i].OrderingKey = "std"
			}
			ids, err := EnqueueMany(ctx, h.db, ms, Standalone())
			if err != nil {
				t.Fatal(err)
			}
			checkManyRows(t, db, ms, ids)
			if n := orphans(t, db); n != 0 {
				t.Errorf("%d ordered messages without a queue entry", n)
			}
		})
	}
	if orm.begun.Load() != 1 {
		t.Errorf("the ORM pool began %d transactions, want 1", orm.begun.Load())
	}
}

// Under InTx the leading messages a worker of this process can take are handed off to it, the
// rest are claimed after the commit; each is delivered once.
func TestEnqueueManyHandsOffUnderInTx(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	var got deliveries
	r := NewRouter()
	r.Handle("welcome", Policy{}, got.handler)
	obs := &handoffCount{}
	w := newTestWorker(t, db.DB, r, idleWorkerConfig(Config{Concurrency: 4, Observer: obs}))
	start(t, w)
	waitIdle(t, w)
	ms := make([]Message, 30)
	for i := range ms {
		ms[i] = Message{EventType: "welcome", Payload: []byte(fmt.Sprintf(`{"i":%d}`, i))}
	}
	var ids []MessageID
	err := InTx(ctx, db.DB, func(tx *sql.Tx) error {
		var err error
		if ids, err = EnqueueMany(ctx, tx, ms); err != nil {
			return err
		}
		for i, id := range ids {
			st, _ := statusIn(t, tx, id)
			if want := map[bool]string{true: "PROCESSING", false: "PENDING"}[i < 4]; st != want {
				t.Errorf("ms[%d] is %s inside the transaction, want %s", i, st, want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	checkManyRows(t, db, ms, ids)
	testutil.Eventually(t, 10*time.Second, "every message SENT", func() bool {
		return countRows(t, db, "status = 'SENT'") == len(ms)
	})
	seen := map[MessageID]int{}
	for _, d := range got.list() {
		seen[d.MessageID]++
	}
	for i, id := range ids {
		if seen[id] != 1 {
			t.Errorf("ms[%d] delivered %d times", i, seen[id])
		}
	}
	if h := obs.handedOff.Load(); h != 4 {
		t.Errorf("%d handed off, want 4", h)
	}
}

// Delay and Header apply to every message of the call, whatever chunk it goes in.
func TestEnqueueManyAppliesOptionsToEvery(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	ms := manyMsgs(73) // chunks of 64, 8 and 1
	ms[5].OrderingKey = "k"
	before := dbNow(t, db)
	var ids []MessageID
	if err := InTx(ctx, db.DB, func(tx *sql.Tx) error {
		var err error
		ids, err = EnqueueMany(ctx, tx, ms, Delay(time.Hour), Header("trace", "t-1"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	checkManyRows(t, db, ms, ids)
	for i, id := range ids {
		var due time.Time
		var hdr sql.NullString
		if err := db.QueryRowContext(ctx, "SELECT next_attempt_at, headers FROM outbox_messages WHERE id = ?", int64(id)).Scan(&due, &hdr); err != nil {
			t.Fatal(err)
		}
		if due.Before(before.Add(time.Hour)) || hdr.String != `{"trace":"t-1"}` {
			t.Errorf("ms[%d]: due %v (enqueued after %v), headers %q; want an hour later and the header", i, due, before, hdr.String)
		}
	}
}

// The read-back of ids (lock mode 2, MySQL's default) on every server, whatever its own lock
// mode: each chunk's ids are found by the call's marker, in input order, while another session
// inserts beside it.
func TestEnqueueManyReadsIDsBack(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := Enqueue(ctx, db.DB, Message{EventType: "other", Payload: []byte(`{}`)}, Standalone()); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	defer func() { close(stop); wg.Wait() }()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	ms := manyMsgs(585)
	marker := sql.NullString{String: manyMarkerPrefix + newToken()[:28], Valid: true}
	var ids []MessageID
	for start := 0; start < len(ms); {
		rows := make([]manyRow, 0, len(ms)-start)
		for _, m := range ms[start:] {
			m.MaxAttempts = DefaultMaxAttempts
			rows = append(rows, manyRow{m: m})
		}
		n := chunkSize(rows, 1<<20, func(manyRow) int { return 1 })
		first, err := insertMessages(ctx, tx, rows[:n], enqueueOptions{}, true, marker, time.Now().UTC())
		if err != nil {
			t.Fatal(err)
		}
		got, err := chunkIDs(ctx, tx, first, n, 1, marker)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, got...)
		start += n
	}
	checkManyRows(t, tx, ms, ids)
}
