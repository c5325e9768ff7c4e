package outbox

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/internal/testdb"
	"github.com/outboxgen/outboxgen/internal/testutil"
)

// An ordered PENDING row without its queue entry, alone under its event type: Stats still
// answers, counts it pending but not due (it cannot be claimed), and reports its key broken.
func TestStatsSurvivesUnqueuedOrderedRow(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	db.Pending(t, "plain_type") // a healthy type beside it is counted as before
	id := db.BrokenKey(t, "acct:1", "odd_type", testdb.BrokenNotQueued, 5)
	s, err := Stats(context.Background(), db)
	if err != nil {
		t.Fatalf("Stats with one unqueued ordered row: %v", err)
	}
	tc := s.ByType["odd_type"]
	if tc.Pending != 1 || tc.Due != 0 || s.Pending != 2 || s.Due != 1 {
		t.Errorf("odd_type pending/due = %d/%d (total %d/%d), want 1/0 (total 2/1): an unqueued row cannot be claimed",
			tc.Pending, tc.Due, s.Pending, s.Due)
	}
	want := BrokenKey{OrderingKey: "acct:1", Seq: 1, Message: MessageID(id), Status: StatusPending, EventType: "odd_type", Reason: BrokenNotQueued}
	if s.BrokenKeys != 1 || len(s.Broken) != 1 || s.Broken[0] != want {
		t.Errorf("BrokenKeys = %d, Broken = %+v; want 1, [%+v]", s.BrokenKeys, s.Broken, want)
	}
}

// A PROCESSING row without its lease (made by hand) is alone under its type: Stats answers.
func TestStatsSurvivesProcessingRowWithoutLease(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	db.MustExec(t, `INSERT INTO outbox_messages (event_type, payload, status, attempts, max_attempts, next_attempt_at, created_at)
		VALUES ('hand_made', '{}', 'PROCESSING', 1, 10, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))`)
	s, err := Stats(context.Background(), db)
	if err != nil {
		t.Fatalf("Stats with a PROCESSING row without claimed_at and reclaim_after: %v", err)
	}
	if tc := s.ByType["hand_made"]; tc.Processing != 1 || tc.Stale != 0 || tc.Stuck != 0 {
		t.Errorf("hand_made = %+v, want 1 processing, 0 stale, 0 stuck", tc)
	}
}

// Every broken shape is reported with its reason, a held key (a FAILED head) and a healthy
// ordered key are not, and the counts of the other queries stay right.
func TestStatsReportsBrokenKeys(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	missing := db.BrokenKey(t, "k:missing", "ev_a", testdb.BrokenHeadMissing, 3)
	sent := db.BrokenKey(t, "k:sent", "ev_a", testdb.BrokenHeadSent, 3)
	unqueued := db.BrokenKey(t, "k:unqueued\xff", "ev_b", testdb.BrokenNotQueued, 3)
	db.HeldKey(t, "k:held", "ev_b", 3)
	enqueueOrderedN(t, db.DB, "ev_b", "k:healthy", 1, 3)
	// A head whose message carries another seq than its entry.
	mismatch := db.BrokenKey(t, "k:mismatch", "ev_a", testdb.BrokenNotQueued, 3)
	db.MustExec(t, `INSERT INTO outbox_ordering_queue (ordering_key, seq, message_id) VALUES ('k:mismatch', 7, ?)`, mismatch)

	s, err := Stats(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]BrokenKey{
		"k:missing":      {OrderingKey: "k:missing", Seq: 1, Message: MessageID(missing), Reason: BrokenHeadMissing},
		"k:sent":         {OrderingKey: "k:sent", Seq: 1, Message: MessageID(sent), Status: StatusSent, EventType: "ev_a", Reason: BrokenHeadFinished},
		"k:unqueued\xff": {OrderingKey: "k:unqueued\xff", Seq: 1, Message: MessageID(unqueued), Status: StatusPending, EventType: "ev_b", Reason: BrokenNotQueued},
	}
	got := map[string][]BrokenKey{}
	for _, b := range s.Broken {
		got[b.OrderingKey] = append(got[b.OrderingKey], b)
	}
	for k, w := range want {
		if len(got[k]) != 1 || got[k][0] != w {
			t.Errorf("broken %q = %+v, want [%+v]", k, got[k], w)
		}
	}
	// k:mismatch is broken twice over: its head entry names a message of seq 1, and that
	// message has no entry at its own seq.
	if m := got["k:mismatch"]; len(m) != 2 || m[0].Reason != BrokenHeadMismatch || m[0].Seq != 7 || m[1].Reason != BrokenNotQueued {
		t.Errorf("broken k:mismatch = %+v, want a head_mismatch at seq 7, then not_queued", m)
	}
	if s.BrokenKeys != 4 || len(s.Broken) != 5 {
		t.Errorf("BrokenKeys = %d with %d listed, want 4 keys, 5 entries: %+v", s.BrokenKeys, len(s.Broken), s.Broken)
	}
	if s.HeldKeys != 1 || s.Held[0].OrderingKey != "k:held" {
		t.Errorf("held = %d %+v, want only k:held", s.HeldKeys, s.Held)
	}
	// Due: only k:healthy's head; every message behind or beside a broken entry waits.
	if s.Due != 1 {
		t.Errorf("Due = %d, want 1 (k:healthy's head)", s.Due)
	}
}

// repairBrokenKeys deletes broken head entries and queues unqueued messages old enough, each
// logged with its key escaped; it leaves a held key, a healthy key and a young unqueued message
// alone. Afterwards nothing is broken and each key's next message is due.
func TestRepairBrokenKeys(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	missing := db.BrokenKey(t, "k:missing", "ev_a", testdb.BrokenHeadMissing, 10)
	sent := db.BrokenKey(t, "k:sent", "ev_a", testdb.BrokenHeadSent, 10)
	unqueued := db.BrokenKey(t, "k:unqueued\xff\n", "ev_b", testdb.BrokenNotQueued, 10)
	young := db.BrokenKey(t, "k:young", "ev_b", testdb.BrokenNotQueued, 0)
	held := db.HeldKey(t, "k:held", "ev_b", 10)
	healthy := enqueueOrderedN(t, db.DB, "ev_b", "k:healthy", 1, 3)
	// The unqueued message's key has a later message queued: the repair puts it after that one.
	res := db.MustExec(t, `INSERT INTO outbox_messages (event_type, payload, status, attempts, max_attempts,
		next_attempt_at, created_at, ordering_key, ordering_seq)
		VALUES ('ev_b', '{}', 'PENDING', 0, 10, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), ?, 2)`, []byte("k:unqueued\xff\n"))
	behind, _ := res.LastInsertId()
	db.MustExec(t, `UPDATE outbox_ordering SET last_seq = 2 WHERE ordering_key = ?`, []byte("k:unqueued\xff\n"))
	db.MustExec(t, `INSERT INTO outbox_ordering_queue (ordering_key, seq, message_id) VALUES (?, 2, ?)`, []byte("k:unqueued\xff\n"), behind)
	queueBefore := countAllQueue(t, db)

	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	done, err := repairBrokenKeys(ctx, db.DB, time.Minute, log)
	if err != nil {
		t.Fatal(err)
	}
	if done.removed != 2 || done.requeued != 1 {
		t.Errorf("repairs = %+v, want 2 head entries removed, 1 message requeued", done)
	}
	if queued(t, db, MessageID(missing)) || queued(t, db, MessageID(sent)) {
		t.Error("a broken head entry is still queued")
	}
	if !queued(t, db, MessageID(unqueued)) || queued(t, db, MessageID(young)) {
		t.Errorf("unqueued old/young queued = %v/%v, want true/false (the young one may be an enqueue in flight)",
			queued(t, db, MessageID(unqueued)), queued(t, db, MessageID(young)))
	}
	if !queued(t, db, MessageID(held)) || !queued(t, db, healthy) {
		t.Error("the repair touched a held or a healthy key")
	}
	if got, want := countAllQueue(t, db), queueBefore-2+1; got != want {
		t.Errorf("queue entries = %d, want %d", got, want)
	}
	var seq int64
	if err := db.QueryRow(`SELECT ordering_seq FROM outbox_messages WHERE id = ?`, unqueued).Scan(&seq); err != nil || seq != 3 {
		t.Errorf("requeued message's seq = %d (%v), want 3: after the key's queued seq 2", seq, err)
	}
	for _, want := range []string{`msg="outbox repaired broken ordering key"`, `ordering_key="k:unqueued\\xFF\n"`, "reason=head_missing",
		"reason=head_finished", "reason=not_queued", "new_seq=3"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("repair log lacks %s:\n%s", want, logs.String())
		}
	}

	s, err := Stats(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if s.BrokenKeys != 1 || len(s.Broken) != 1 || s.Broken[0].Message != MessageID(young) {
		t.Errorf("after the repair Broken = %d %+v, want only the young unqueued message", s.BrokenKeys, s.Broken)
	}
	// k:missing's and k:sent's second messages, k:healthy's head and k:unqueued's seq 2.
	if s.Due != 4 {
		t.Errorf("Due = %d after the repair, want 4", s.Due)
	}
	// A second run finds nothing to do.
	if done, err := repairBrokenKeys(ctx, db.DB, time.Minute, log); err != nil || done != (brokenRepairs{}) {
		t.Errorf("second run = %+v, %v; want nothing done", done, err)
	}
}

func countAllQueue(t *testing.T, db DBTX) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM outbox_ordering_queue").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A running worker's maintenance repairs broken keys by itself: the message behind a missing
// head and an unqueued message are delivered, the latter after the message queued before it.
func TestWorkerRepairsBrokenKeys(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	db.BrokenKey(t, "w:missing", "broken_ev", testdb.BrokenHeadMissing, 10)
	var behindMissing int64
	if err := db.QueryRow(`SELECT id FROM outbox_messages WHERE ordering_key = 'w:missing'`).Scan(&behindMissing); err != nil {
		t.Fatal(err)
	}
	unqueued := db.BrokenKey(t, "w:unqueued", "broken_ev", testdb.BrokenNotQueued, 10)
	ahead := enqueueOrderedN(t, db.DB, "broken_ev", "w:unqueued", 2, 3) // seq 2, queued
	handled := make(chan int64, 10)
	r := NewRouter()
	r.Handle("broken_ev", Policy{MaxAttempts: 3}, func(_ context.Context, _ json.RawMessage, d Delivery) error {
		handled <- int64(d.MessageID)
		return nil
	})
	w := newTestWorker(t, db.DB, r, Config{StaleAfter: 2 * time.Minute, ReclaimInterval: 50 * time.Millisecond})
	start(t, w)
	var got []int64
	for len(got) < 3 {
		select {
		case id := <-handled:
			got = append(got, id)
		case <-time.After(20 * time.Second):
			t.Fatalf("delivered %v, want %d, %d and %d", got, behindMissing, int64(ahead), unqueued)
		}
	}
	pos := map[int64]int{}
	for i, id := range got {
		pos[id] = i
	}
	if _, ok := pos[behindMissing]; !ok || pos[int64(ahead)] > pos[unqueued] {
		t.Errorf("delivered %v: want %d (behind a missing head), and %d before %d (the requeued one goes last)",
			got, behindMissing, int64(ahead), unqueued)
	}
}

// The repair never mistakes live traffic for a broken key: while enqueuers commit ordered
// messages and a worker claims and sends them, repairs run back to back with no age margin at
// all. Committed rows are never broken, so they repair nothing, and every key is delivered
// once per message, in order.
func TestRepairBrokenKeysLeavesLiveTrafficAlone(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	const keys, perKey = 4, 40
	var mu sync.Mutex
	got := map[string][]int64{}
	r := NewRouter()
	r.Handle("live_ev", Policy{MaxAttempts: 3}, func(_ context.Context, raw json.RawMessage, _ Delivery) error {
		var p orderedPayload
		if err := json.Unmarshal(raw, &p); err != nil {
			return err
		}
		mu.Lock()
		got[p.Key] = append(got[p.Key], p.N)
		mu.Unlock()
		return nil
	})
	start(t, newTestWorker(t, db.DB, r, Config{}))

	var repairs brokenRepairs
	stopRepair := make(chan struct{})
	repairDone := make(chan error, 1)
	go func() {
		log := slog.New(slog.NewTextHandler(io.Discard, nil))
		for {
			select {
			case <-stopRepair:
				repairDone <- nil
				return
			default:
			}
			done, err := repairBrokenKeys(ctx, db.DB, 0, log)
			if err != nil {
				repairDone <- err
				return
			}
			repairs.removed += done.removed
			repairs.requeued += done.requeued
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, keys)
	for k := 0; k < keys; k++ {
		wg.Add(1)
		go func(key string) {
			defer wg.Done()
			for n := int64(1); n <= perKey; n++ {
				payload, _ := json.Marshal(orderedPayload{Key: key, N: n})
				err := InTx(ctx, db.DB, func(tx *sql.Tx) error {
					_, err := Enqueue(ctx, tx, Message{EventType: "live_ev", Payload: payload, OrderingKey: key})
					return err
				})
				if err != nil {
					errs <- err
					return
				}
			}
		}(fmt.Sprintf("live:%d", k))
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	testutil.Eventually(t, 60*time.Second, "every message sent", func() bool {
		return countRows(t, db, "event_type = 'live_ev' AND status = 'SENT'") == keys*perKey
	})
	close(stopRepair)
	if err := <-repairDone; err != nil {
		t.Fatalf("repair: %v", err)
	}
	if repairs != (brokenRepairs{}) {
		t.Errorf("repairs on live traffic = %+v, want none", repairs)
	}
	mu.Lock()
	defer mu.Unlock()
	for k := 0; k < keys; k++ {
		key := fmt.Sprintf("live:%d", k)
		if len(got[key]) != perKey {
			t.Errorf("%s: %d deliveries, want %d", key, len(got[key]), perKey)
		}
		for i, n := range got[key] {
			if n != int64(i+1) {
				t.Errorf("%s delivered out of order: %v", key, got[key])
				break
			}
		}
	}
}

// An unqueued message whose key's counter retention dropped gets the seq it already had. The
// repair queues it all the same, instead of reading the unchanged row as a change.
func TestRepairRequeuesAfterTheCounterWasDropped(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	id := db.BrokenKey(t, "d:unqueued", "broken_ev", testdb.BrokenNotQueued, 10)
	db.MustExec(t, "DELETE FROM outbox_ordering")
	done, err := repairBrokenKeys(ctx, db.DB, time.Minute, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil || done.requeued != 1 {
		t.Fatalf("repair = %+v, %v; want the message queued", done, err)
	}
	var seq, mid int64
	if err := db.QueryRow("SELECT seq, message_id FROM outbox_ordering_queue WHERE ordering_key = 'd:unqueued'").Scan(&seq, &mid); err != nil || seq != 1 || mid != id {
		t.Errorf("queue entry = seq %d, message %d (%v); want seq 1, message %d", seq, mid, err, id)
	}
}
