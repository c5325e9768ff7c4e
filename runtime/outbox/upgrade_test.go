package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/internal/testutil"
	"github.com/outboxgen/outboxgen/queries"
)

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
	// Versions 2 to 6 alter the three tables (5 with three statements on outbox_messages, 6
	// with three on outbox_inbox); versions 4 to 6 also create the two ordering tables,
	// outbox_pauses and outbox_rate_limits.
	if err != nil || len(stmts) != 23 {
		t.Fatalf("SchemaUpgrade on version 1 = %d statements, %v; want 19 ALTER TABLEs and 4 CREATE TABLEs", len(stmts), err)
	}
	for _, s := range stmts {
		if !strings.HasPrefix(s, "ALTER TABLE ") && !strings.HasPrefix(s, "CREATE TABLE IF NOT EXISTS outbox_ordering") &&
			!strings.HasPrefix(s, "CREATE TABLE IF NOT EXISTS outbox_pauses") && !strings.HasPrefix(s, "CREATE TABLE IF NOT EXISTS outbox_rate_limits") {
			t.Errorf("upgrade statement %q, want ALTER TABLE or the CREATE of the ordering tables, outbox_pauses or outbox_rate_limits", s)
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
		if want := fmt.Sprintf("outboxgen schema %d min %d", SchemaVersion, currentMin); comment != want {
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
		if want := fmt.Sprintf("outboxgen schema %d min %d", SchemaVersion, currentMin); comment != want {
			t.Errorf("table %s comment %q, want %q", table, comment, want)
		}
	}
	// The upgrade to version 4 is not additive (an older worker would claim ordered rows out of
	// order), so the min is 4. Version 5 is additive (an ENUM value and a table version 4 never
	// uses) and keeps it.
	schemas, err := TableSchemas(context.Background(), d.DB)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range schemas {
		if !s.Exists || s.Version != SchemaVersion || s.Min != currentMin {
			t.Errorf("table %s after the upgrade: %+v, want version %d and min %d", s.Table, s, SchemaVersion, currentMin)
		}
	}
}
