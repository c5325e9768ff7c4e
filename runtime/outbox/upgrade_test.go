package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/internal/testdb"
	"github.com/outboxgen/outboxgen/internal/testutil"
	"github.com/outboxgen/outboxgen/queries"
)

// v1DB is a database with the tables of the first release (testdata/schema_v1.sql is
// queries/schema.sql as it was then, frozen).
func v1DB(t *testing.T) *testdb.DB {
	t.Helper()
	b, err := os.ReadFile("testdata/schema_v1.sql")
	if err != nil {
		t.Fatal(err)
	}
	d := testdb.New(t)
	for _, stmt := range queries.Split(string(b)) {
		d.MustExec(t, stmt)
	}
	return d
}

func tableVersions(t *testing.T, d *testdb.DB) map[string]string {
	t.Helper()
	rows, err := d.Query("SELECT TABLE_NAME, TABLE_COMMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var name, comment string
		if err := rows.Scan(&name, &comment); err != nil {
			t.Fatal(err)
		}
		out[name] = comment
	}
	return out
}

// v1SQL is the first release's worker statements (testdata/v1_worker.sql), by sqlc query name.
func v1SQL(t testing.TB) map[string]string {
	t.Helper()
	b, err := os.ReadFile("testdata/v1_worker.sql")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, part := range strings.Split(string(b), "-- name: ")[1:] {
		head, body, _ := strings.Cut(part, "\n")
		out[strings.Fields(head)[0]] = strings.TrimSuffix(strings.TrimSpace(body), ";")
	}
	for _, name := range []string{"MessageInsert", "MessageClaimCandidates", "MessageClaimLockIDs", "MessageClaimMark",
		"MessageMarkSent", "MessageMarkRetry", "MessageMarkFailed"} {
		if out[name] == "" {
			t.Fatalf("testdata/v1_worker.sql has no %s", name)
		}
	}
	return out
}

// expandSlices gives each /*SLICE:name*/? of a frozen statement n[name] placeholders, as sqlc's
// generated code did.
func expandSlices(stmt string, n map[string]int) string {
	for name, k := range n {
		stmt = strings.Replace(stmt, "/*SLICE:"+name+"*/?", strings.Repeat(",?", k)[1:], 1)
	}
	return stmt
}

// v1Insert writes a row with the first release's Enqueue statement (its MessageInsert, max
// attempts 10): a row as a version-1 application left it.
func v1Insert(t *testing.T, d *testdb.DB, eventType, payload, key string, delay time.Duration) MessageID {
	t.Helper()
	res := d.MustExec(t, v1SQL(t)["MessageInsert"], eventType, payload, key, 10, delay.Microseconds())
	id, err := res.LastInsertId()
	if err != nil {
		t.Fatal(err)
	}
	return MessageID(id)
}

// v1Claimed is a row a version-1 claim took.
type v1Claimed struct {
	id                   MessageID
	eventType, payload   string
	attempt, maxAttempts int
	token                string
}

// v1Worker is the first release's worker as the database saw it, sending that release's
// statements (testdata/v1_worker.sql): today's Worker refuses version-1 tables, so this is how
// a fleet still running release 1 meets Migrate. Its claim is one READ COMMITTED transaction
// (MessageClaimCandidates from the start of the claim index, MessageClaimLockIDs on them,
// MessageClaimMark with a fresh token and the lease) and each result is a fenced write of its
// own (MessageMarkSent, MessageMarkRetry with no backoff, MessageMarkFailed), under autocommit
// as release 1 wrote a lone result. Left out, as the database does not see them: prefetch,
// batching several results in one transaction, the candidate windows past the first and the
// fallback claim by index scan (only claims held by other claimers reach those).
type v1Worker struct {
	t      testing.TB
	db     *sql.DB
	sql    map[string]string
	types  []string
	lease  time.Duration
	handle func(v1Claimed) Outcome

	claims   atomic.Int64 // claim transactions committed, empty ones included
	handlers sync.WaitGroup
	mu       sync.Mutex
	handled  map[MessageID]int   // deliveries by this worker
	landed   map[MessageID]int64 // rows changed by each message's latest result write
}

// start runs the claim loop until stop; stop then waits for the handlers in flight and their
// result writes.
func (v *v1Worker) start() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			got, err := v.claim(10)
			if err != nil {
				// Release 1 logged "claim failed" and tried again at its next poll.
				v.t.Logf("version-1 claim: %v", err)
			}
			for _, c := range got {
				v.handlers.Add(1)
				go func() {
					defer v.handlers.Done()
					v.dispatch(c)
				}()
			}
			if len(got) == 0 {
				select {
				case <-ctx.Done():
				case <-time.After(20 * time.Millisecond):
				}
			}
		}
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			<-done
			v.handlers.Wait()
		})
	}
	v.t.Cleanup(stop)
	return stop
}

func (v *v1Worker) claim(n int) (_ []v1Claimed, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tx, err := v.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	types := make([]any, len(v.types))
	for i, et := range v.types {
		types[i] = et
	}
	from := time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC) // release 1's claimFromStart
	args := append(append([]any{from, from, int64(0)}, types...), 2*n)
	rows, err := tx.QueryContext(ctx, expandSlices(v.sql["MessageClaimCandidates"], map[string]int{"event_types": len(types)}), args...)
	if err != nil {
		return nil, fmt.Errorf("claim candidates: %w", err)
	}
	var ids []any
	for rows.Next() {
		var id int64
		var due time.Time
		if err := rows.Scan(&id, &due); err != nil {
			rows.Close()
			return nil, err
		}
		ids = append(ids, id)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, fmt.Errorf("claim candidates: %w", err)
	}
	var got []v1Claimed
	if len(ids) > 0 {
		args = append(append(append([]any{}, ids...), types...), n)
		rows, err = tx.QueryContext(ctx, expandSlices(v.sql["MessageClaimLockIDs"], map[string]int{"ids": len(ids), "event_types": len(types)}), args...)
		if err != nil {
			return nil, fmt.Errorf("claim lock: %w", err)
		}
		for rows.Next() {
			var c v1Claimed
			var key string
			var created, due time.Time
			if err := rows.Scan(&c.id, &c.eventType, &c.payload, &key, &c.attempt, &c.maxAttempts, &created, &due); err != nil {
				rows.Close()
				return nil, err
			}
			c.attempt++
			got = append(got, c)
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return nil, fmt.Errorf("claim lock: %w", err)
		}
	}
	if len(got) > 0 {
		token := newToken()
		args = []any{v.lease.Microseconds(), token}
		for i := range got {
			got[i].token = token
			args = append(args, int64(got[i].id))
		}
		res, err := tx.ExecContext(ctx, expandSlices(v.sql["MessageClaimMark"], map[string]int{"ids": len(got)}), args...)
		if err != nil {
			return nil, fmt.Errorf("claim mark: %w", err)
		}
		if marked, _ := res.RowsAffected(); marked != int64(len(got)) {
			return nil, fmt.Errorf("claim mark: %d of %d locked rows changed", marked, len(got))
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("commit claim: %w", err)
	}
	v.claims.Add(1)
	return got, nil
}

// dispatch runs the handler and writes its result, fenced on the claim's token; a write that
// fails (a lock wait during an ALTER, say) is tried again, as release 1 kept a result until it
// was written.
func (v *v1Worker) dispatch(c v1Claimed) {
	v.mu.Lock()
	v.handled[c.id]++
	v.mu.Unlock()
	outcome := v.handle(c)
	var stmt string
	var args []any
	switch outcome {
	case OutcomeSent:
		stmt, args = expandSlices(v.sql["MessageMarkSent"], map[string]int{"ids": 1}), []any{c.token, int64(c.id)}
	case OutcomeRetried:
		stmt, args = v.sql["MessageMarkRetry"], []any{int64(0), fmt.Sprintf("attempt %d of %d: try again", c.attempt, c.maxAttempts), int64(c.id), c.token}
	case OutcomeFailed:
		stmt, args = v.sql["MessageMarkFailed"], []any{fmt.Sprintf("attempt %d of %d: bounced", c.attempt, c.maxAttempts), int64(c.id), c.token}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := v.db.Exec(stmt, args...)
		if err == nil {
			n, _ := res.RowsAffected()
			v.mu.Lock()
			v.landed[c.id] = n
			v.mu.Unlock()
			return
		}
		if time.Now().After(deadline) {
			v.t.Errorf("version-1 result write for message %d: %v", c.id, err)
			return
		}
		v.t.Logf("version-1 result write for message %d: %v (trying again)", c.id, err)
		time.Sleep(50 * time.Millisecond)
	}
}

func (v *v1Worker) handledBy(id MessageID) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.handled[id]
}

func (v *v1Worker) landedOf(id MessageID) (int64, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	n, ok := v.landed[id]
	return n, ok
}

// schemaSnapshot is every table's SHOW CREATE TABLE and every message row.
func schemaSnapshot(t *testing.T, d *testdb.DB) (map[string]string, map[MessageID]row) {
	t.Helper()
	tables := map[string]string{}
	for name := range tableVersions(t, d) {
		var n, ddl string
		if err := d.QueryRow("SHOW CREATE TABLE "+name).Scan(&n, &ddl); err != nil {
			t.Fatal(err)
		}
		tables[name] = ddl
	}
	rows := map[MessageID]row{}
	ids, err := d.Query("SELECT id FROM outbox_messages")
	if err != nil {
		t.Fatal(err)
	}
	defer ids.Close()
	for ids.Next() {
		var id int64
		if err := ids.Scan(&id); err != nil {
			t.Fatal(err)
		}
		rows[MessageID(id)] = getRow(t, d, MessageID(id))
	}
	return tables, rows
}

// The upgrade from the first release's tables under a running version-1 worker (the release's
// own claim and result statements, testdata/v1_worker.sql): it claims and handles rows before
// the upgrade (SENT, FAILED, retried then SENT), holds one handler (a PROCESSING row with a live
// lease) across two Migrate calls from two pools at once, keeps claiming while they run and
// after, and writes the held row's result late, fenced on its version-1 claim token: it lands.
// A worker of this version, started after the upgrade beside the old one, delivers what the old
// one does not handle and drains the rest. Every row ends where it should, each delivered
// once, none lost; Migrate twice more changes nothing.
func TestMigrateUpgradesV1InPlace(t *testing.T) {
	t.Parallel()
	d := v1DB(t)
	ctx := context.Background()

	// A key of the inbox recorded under version 1; after the upgrade a key differing only in
	// case must be new.
	d.MustExec(t, "INSERT INTO outbox_inbox (consumer, idem_key, processed_at) VALUES ('billing', 'invoice:in_1Ab', UTC_TIMESTAMP(6))")

	// One behaviour per event type, whichever worker delivers: "retry" fails its first attempt,
	// "slow" waits for release (only its first delivery: a second would be a bug the counts catch).
	calls := newCalls()
	release, slowIn := make(chan struct{}), make(chan struct{})
	var slowOnce sync.Once
	behave := func(eventType string, attempt int) Outcome {
		switch eventType {
		case "bad":
			return OutcomeFailed
		case "retry":
			if attempt == 1 {
				return OutcomeRetried
			}
		case "slow":
			first := false
			slowOnce.Do(func() { first = true; close(slowIn) })
			if first {
				<-release
			}
		}
		return OutcomeSent
	}
	v1 := &v1Worker{t: t, db: d.Open(t), sql: v1SQL(t), types: []string{"ok", "bad", "retry", "slow"}, lease: 2 * time.Minute,
		handled: map[MessageID]int{}, landed: map[MessageID]int64{},
		handle: func(c v1Claimed) Outcome {
			calls.add(Delivery{MessageID: c.id, EventType: c.eventType, Attempt: c.attempt, ClaimToken: c.token}, []byte(c.payload))
			return behave(c.eventType, c.attempt)
		}}
	r := NewRouter()
	for _, et := range []string{"ok", "bad", "retry", "slow", "new"} {
		r.Handle(et, Policy{}, func(_ context.Context, p json.RawMessage, dl Delivery) error {
			calls.add(dl, p)
			switch behave(dl.EventType, dl.Attempt) {
			case OutcomeFailed:
				return Permanent(errors.New("bounced"))
			case OutcomeRetried:
				return errors.New("try again")
			}
			return nil
		})
	}

	// Before the upgrade: rows written by release 1's Enqueue, and its worker running. "new" is
	// a type only this version handles (a rolling deploy's new event): release 1 leaves it.
	var ok, bad []MessageID
	for i := range 3 {
		ok = append(ok, v1Insert(t, d, "ok", fmt.Sprintf(`{"n":%d}`, i), fmt.Sprintf("k:%d", i), 0))
	}
	for i := range 2 {
		bad = append(bad, v1Insert(t, d, "bad", `{"b":1}`, fmt.Sprintf("b:%d", i), 0))
	}
	retried := v1Insert(t, d, "retry", `{"r":1}`, "r", 0)
	slow := v1Insert(t, d, "slow", `{"slow":true}`, "s", 0)
	later := v1Insert(t, d, "ok", `{"n":9}`, "k:9", time.Hour)
	fresh := []MessageID{v1Insert(t, d, "new", `{"n": 2, "s":"é"}`, "", 0), v1Insert(t, d, "new", `{"n":7}`, "k:7", 0)}
	stopV1 := v1.start()
	var releaseOnce sync.Once
	releaseSlow := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(releaseSlow) // before stopV1 waits for the handler, should the test end early
	select {
	case <-slowIn:
	case <-time.After(20 * time.Second):
		t.Fatal("the version-1 worker never started the slow handler")
	}
	testutil.Eventually(t, 20*time.Second, "the version-1 worker's results (3 SENT, 2 FAILED, 1 retried then SENT)", func() bool {
		return countRows(t, d, "status='SENT'") == 4 && countRows(t, d, "status='FAILED'") == 2
	})
	settled := append(append(append([]MessageID{retried, slow, later}, ok...), bad...), fresh...)
	before := map[MessageID]row{}
	for _, id := range settled {
		before[id] = getRow(t, d, id)
	}
	if b := before[slow]; b.Status != "PROCESSING" || !b.ClaimToken.Valid || !b.ReclaimAfter.Valid || b.Attempts != 1 {
		t.Fatalf("held message before the upgrade: %+v, want PROCESSING, attempt 1, a claim token and a lease", b)
	}
	if b := before[retried]; b.Status != "SENT" || b.Attempts != 2 || !strings.Contains(b.LastError.String, "try again") {
		t.Fatalf("retried message before the upgrade: %+v, want SENT at attempt 2 after a retry", b)
	}

	// What a version-1 database still needs.
	stmts, err := SchemaUpgrade(ctx, d.DB)
	// Versions 2, 3 and 4 alter the three tables; version 4 also creates the two ordering tables.
	if err != nil || len(stmts) != 11 {
		t.Fatalf("SchemaUpgrade on version 1 = %d statements, %v; want 9 ALTER TABLEs and 2 CREATE TABLEs", len(stmts), err)
	}
	for _, s := range stmts {
		if !strings.HasPrefix(s, "ALTER TABLE ") && !strings.HasPrefix(s, "CREATE TABLE IF NOT EXISTS outbox_ordering") {
			t.Errorf("upgrade statement %q, want ALTER TABLE or the ordering tables' CREATE", s)
		}
	}
	// This version's worker refuses the old tables, saying what to do.
	if _, err := NewWorker(d.DB, r, Config{}); err == nil || !strings.Contains(err.Error(), "run outboxgen migrate") {
		t.Fatalf("NewWorker on version-1 tables: %v, want the migrate hint", err)
	}

	// Two processes migrate at once while the version-1 worker runs, holds the slow handler and
	// has due rows to claim: both succeed, one waits for the other.
	mid := make([]MessageID, 4)
	for i := range mid {
		mid[i] = v1Insert(t, d, "ok", fmt.Sprintf(`{"mid":%d}`, i), "", 0)
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	gate := make(chan struct{})
	for i := range errs {
		pool := d.Open(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			errs[i] = Migrate(ctx, pool)
		}()
	}
	claimsBefore := v1.claims.Load()
	close(gate)
	wg.Wait()
	t.Logf("the version-1 worker committed %d claims while Migrate ran", v1.claims.Load()-claimsBefore)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("concurrent Migrate %d: %v", i, err)
		}
	}
	for table, comment := range tableVersions(t, d) {
		if want := fmt.Sprintf("outboxgen schema %d", SchemaVersion); comment != want {
			t.Errorf("table %s comment %q after Migrate, want %q", table, comment, want)
		}
	}
	if stmts, err := SchemaUpgrade(ctx, d.DB); err != nil || len(stmts) != 0 {
		t.Errorf("SchemaUpgrade after Migrate = %q, %v; want nothing to do", stmts, err)
	}
	// Every settled row as it was, byte for byte; the held one still PROCESSING under its lease.
	for id, b := range before {
		a := getRow(t, d, id)
		if a.Status != b.Status || a.Attempts != b.Attempts || a.Payload != b.Payload || a.Key != b.Key ||
			a.EventType != b.EventType || a.ClaimToken != b.ClaimToken || a.LastError != b.LastError ||
			!a.NextAttemptAt.Equal(b.NextAttemptAt) || !a.ReclaimAfter.Time.Equal(b.ReclaimAfter.Time) {
			t.Errorf("message %d changed by the upgrade:\n before %+v\n after  %+v", id, b, a)
		}
	}

	// The version-1 worker goes on after the upgrade: it claims on the upgraded tables, and
	// delivers what release 1's Enqueue writes there, while still holding the slow handler.
	claimsAt := v1.claims.Load()
	post := []MessageID{v1Insert(t, d, "ok", `{"post":1}`, "p:1", 0), v1Insert(t, d, "ok", `{"post":2}`, "p:2", 0)}
	testutil.Eventually(t, 20*time.Second, "the version-1 worker's deliveries after the upgrade", func() bool {
		return v1.claims.Load() > claimsAt+1 && statusOf(t, d, post[0]) == "SENT" && statusOf(t, d, post[1]) == "SENT" &&
			countRows(t, d, fmt.Sprintf("status='SENT' AND id IN (%d,%d,%d,%d)", mid[0], mid[1], mid[2], mid[3])) == 4
	})

	// A worker of this version starts beside it (a rolling deploy): it delivers the type only it
	// handles and new messages, and leaves the held row to its lease.
	stop := start(t, newTestWorker(t, d.Open(t), r, fastConfig(Config{})))
	after := enqueueN(t, d.DB, "ok", 4)
	testutil.Eventually(t, 20*time.Second, "new and version-1 \"new\" messages SENT", func() bool {
		for _, id := range append(append([]MessageID{}, after...), fresh...) {
			if statusOf(t, d, id) != "SENT" {
				return false
			}
		}
		return true
	})
	if s := getRow(t, d, slow); s.Status != "PROCESSING" || s.ClaimToken != before[slow].ClaimToken {
		t.Errorf("held message with a live lease, under a worker of this version: %+v, want it untouched", s)
	}

	// The held handler returns: release 1's fenced SENT write, on its version-1 claim token,
	// lands after the upgrade.
	releaseSlow()
	testutil.Eventually(t, 20*time.Second, "the held message's late result written", func() bool {
		_, ok := v1.landedOf(slow)
		return ok
	})
	if n, _ := v1.landedOf(slow); n != 1 {
		t.Errorf("the held message's late fenced result after the upgrade changed %d rows, want 1", n)
	}
	if a := getRow(t, d, slow); a.Status != "SENT" || a.Attempts != 1 || a.ClaimToken != before[slow].ClaimToken {
		t.Errorf("held message after its late result: %+v, want SENT at attempt 1 under its version-1 token", a)
	}
	stopV1()

	// The version-1 fleet is gone; this version's worker drains the rest.
	more := enqueueN(t, d.DB, "ok", 3)
	testutil.Eventually(t, 20*time.Second, "messages enqueued after the version-1 worker stopped SENT", func() bool {
		for _, id := range more {
			if statusOf(t, d, id) != "SENT" {
				return false
			}
		}
		return true
	})
	stop()

	// Every row accounted for, each delivered exactly once (retried: twice, the second SENT).
	var once []MessageID
	for _, ids := range [][]MessageID{ok, mid, post, after, more, fresh, {slow}} {
		once = append(once, ids...)
	}
	if n, want := countRows(t, d, "1=1"), len(once)+len(bad)+2; n != want {
		t.Errorf("%d rows in outbox_messages, want %d", n, want)
	}
	for _, id := range once {
		if s, n := statusOf(t, d, id), calls.of(id); s != "SENT" || n != 1 {
			t.Errorf("message %d: %s, handled %d times (%d by the version-1 worker); want SENT, once", id, s, n, v1.handledBy(id))
		}
	}
	for _, id := range []MessageID{ok[0], ok[1], ok[2], slow, post[0], post[1], mid[0], mid[1], mid[2], mid[3]} {
		if n := v1.handledBy(id); n != 1 {
			t.Errorf("message %d handled %d times by the version-1 worker, want 1", id, n)
		}
	}
	for _, id := range fresh {
		if n := v1.handledBy(id); n != 0 {
			t.Errorf("message %d of a type release 1 does not handle: handled %d times by it, want 0", id, n)
		}
	}
	if s, n := getRow(t, d, retried), calls.of(retried); s.Status != "SENT" || s.Attempts != 2 || n != 2 {
		t.Errorf("retried message: %s at attempt %d, handled %d times; want SENT, 2, 2", s.Status, s.Attempts, n)
	}
	for _, id := range bad {
		if s, n := statusOf(t, d, id), calls.of(id); s != "FAILED" || n != 1 {
			t.Errorf("failed message %d: %s, handled %d times; want FAILED, once", id, s, n)
		}
	}
	if s, n := statusOf(t, d, later), calls.of(later); s != "PENDING" || n != 0 {
		t.Errorf("delayed message: %s, handled %d times; want PENDING, 0", s, n)
	}
	calls.mu.Lock()
	got := calls.payloads[fresh[0]]
	calls.mu.Unlock()
	if got != before[fresh[0]].Payload {
		t.Errorf("payload delivered after the upgrade: %q, want the stored %q", got, before[fresh[0]].Payload)
	}
	if first, err := Once(ctx, d, "billing", "invoice:in_1aB"); err != nil || !first {
		t.Errorf("Once(in_1aB) after the upgrade with in_1Ab recorded: %v, %v; want true", first, err)
	}
	if first, err := Once(ctx, d, "billing", "invoice:in_1Ab"); err != nil || first {
		t.Errorf("Once(in_1Ab) recorded under version 1, after the upgrade: %v, %v; want false", first, err)
	}

	// Migrate twice more: nothing to do, no table or row changed.
	tablesBefore, rowsBefore := schemaSnapshot(t, d)
	for i := range 2 {
		if err := Migrate(ctx, d.DB); err != nil {
			t.Errorf("Migrate again (%d): %v", i+1, err)
		}
	}
	tablesAfter, rowsAfter := schemaSnapshot(t, d)
	for name, ddl := range tablesBefore {
		if tablesAfter[name] != ddl {
			t.Errorf("table %s changed by a Migrate with nothing to do:\n before %s\n after  %s", name, ddl, tablesAfter[name])
		}
	}
	if len(tablesAfter) != len(tablesBefore) || len(rowsAfter) != len(rowsBefore) {
		t.Errorf("Migrate with nothing to do: %d tables, %d rows; before it %d, %d", len(tablesAfter), len(rowsAfter), len(tablesBefore), len(rowsBefore))
	}
	for id, b := range rowsBefore {
		if a := rowsAfter[id]; a != b {
			t.Errorf("message %d changed by a Migrate with nothing to do:\n before %+v\n after  %+v", id, b, a)
		}
	}
}

// From version 2 on, the later versions (3: headers, 4: the ordering columns and tables) add
// columns online (an instant ALTER where the server has it); a version-2 row is untouched.
func TestMigrateUpgradesV2ToCurrent(t *testing.T) {
	t.Parallel()
	d := v1DB(t)
	ups, err := queries.Upgrades()
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range ups {
		if u.Version == 2 {
			for _, stmt := range u.Statements {
				d.MustExec(t, stmt)
			}
		}
	}
	id := v1Insert(t, d, "ok", `{"a":1}`, "k", 0)
	if err := Migrate(context.Background(), d.DB); err != nil {
		t.Fatal(err)
	}
	if rec, err := Inspect(context.Background(), d, id); err != nil || string(rec.Payload) != `{"a":1}` || rec.Headers != nil || rec.OrderingKey != "" {
		t.Errorf("version-2 row after the upgrade to %d: %+v, %v; want its payload, no headers, no ordering key", SchemaVersion, rec, err)
	}
	for table, comment := range tableVersions(t, d) {
		if want := fmt.Sprintf("outboxgen schema %d", SchemaVersion); comment != want {
			t.Errorf("table %s comment %q, want %q", table, comment, want)
		}
	}
	// The upgrade to version 4 is not additive (an older worker would claim ordered rows out of
	// order): every table's min is the version, which the mark without min says, and which every
	// earlier outboxgen reads as the version it is (one that knew no min would misread a min).
	schemas, err := TableSchemas(context.Background(), d.DB)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range schemas {
		if !s.Exists || s.Version != SchemaVersion || s.Min != SchemaVersion {
			t.Errorf("table %s after the upgrade: %+v, want version and min %d", s.Table, s, SchemaVersion)
		}
	}
}

// Migrate names each column whose type or collation is wrong in a table that claims to be
// current, rather than letting keys compare case-blind.
func TestMigrateChecksTypesAndCollations(t *testing.T) {
	t.Parallel()
	d := testdb.Migrated(t)
	d.MustExec(t, "ALTER TABLE outbox_inbox MODIFY idem_key VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL")
	d.MustExec(t, "ALTER TABLE outbox_messages MODIFY payload LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL")
	err := Migrate(context.Background(), d.DB)
	for _, want := range []string{
		"column outbox_inbox.idem_key is varchar(191) collate utf8mb4_general_ci, want varbinary(764)",
		"column outbox_messages.payload has collation utf8mb4_general_ci, want utf8mb4_bin",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Migrate over altered columns: err = %v\nwant it to contain %q", err, want)
		}
	}
	if err != nil && strings.Contains(err.Error(), "\n") {
		t.Errorf("Migrate's error spans lines: %q", err)
	}
}

// A table from a newer outboxgen is not downgraded or touched.
func TestMigrateRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	d := testdb.Migrated(t)
	d.MustExec(t, "ALTER TABLE outbox_messages COMMENT = 'outboxgen schema 99'")
	err := Migrate(context.Background(), d.DB)
	if err == nil || !strings.Contains(err.Error(), "table outbox_messages is at schema version 99, newer than this outboxgen's 4") {
		t.Errorf("Migrate over a newer table: err = %v", err)
	}
}

// A server that logs statements rejects the worker's READ COMMITTED writes (error 1665):
// Migrate and NewWorker say so at start. Where the binary log is off (MariaDB's default), the
// setting is harmless and both go on.
func TestStatementBinlogIsRefusedAtStart(t *testing.T) {
	t.Parallel()
	d := testdb.Migrated(t)
	var logBin int
	if err := d.QueryRow("SELECT @@log_bin").Scan(&logBin); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("mysql", d.DSN+"&binlog_format=%27STATEMENT%27")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	merr := Migrate(context.Background(), db)
	r := NewRouter()
	r.Handle("e", Policy{}, func(context.Context, json.RawMessage, Delivery) error { return nil })
	_, werr := NewWorker(db, r, Config{})
	if logBin == 1 {
		for name, err := range map[string]error{"Migrate": merr, "NewWorker": werr} {
			if err == nil || !strings.Contains(err.Error(), "binlog_format=STATEMENT") {
				t.Errorf("%s with log_bin=ON and binlog_format=STATEMENT: err = %v, want it to name binlog_format=STATEMENT", name, err)
			}
		}
		// And the refusal is right: a READ COMMITTED write does fail there.
		tx, err := db.BeginTx(context.Background(), &sql.TxOptions{Isolation: sql.LevelReadCommitted})
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if _, err := tx.Exec("UPDATE outbox_messages SET attempts = 0 WHERE id = 0"); err == nil || !strings.Contains(err.Error(), "1665") {
			t.Errorf("READ COMMITTED write under binlog_format=STATEMENT: %v, want error 1665", err)
		}
		return
	}
	if merr != nil || werr != nil {
		t.Errorf("log_bin=OFF, binlog_format=STATEMENT: Migrate %v, NewWorker %v; want both nil", merr, werr)
	}
}
