package cli

import (
	"context"
	"database/sql"
	"encoding/json"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/internal/testdb"
	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// scenario builds the table that TestStatus reads:
//
//	welcome_email   3 due PENDING (one created 2h ago), 1 PENDING delayed 1h, 2 SENT
//	invoice_paid    PROCESSING: 1 healthy, 1 stale (lease 5m ended 1m ago),
//	                1 stuck (claimed 20m ago with a 5m lease: > 3x, nobody reclaims)
//	payment_failed  FAILED 10m ago and 3h ago
func scenario(t *testing.T) (*testdb.DB, fixtures) {
	db := testdb.Migrated(t)
	f := fixtures{t: t, db: db}
	old := f.enqueue("welcome_email")
	db.MustExec(t, "UPDATE outbox_messages SET created_at = TIMESTAMPADD(HOUR, -2, created_at) WHERE id = ?", old)
	f.enqueue("welcome_email")
	f.enqueue("welcome_email")
	f.enqueue("welcome_email", outbox.Delay(time.Hour))
	f.sent("welcome_email", 60)
	f.sent("welcome_email", 8*86400)
	f.processing("invoice_paid", 60, 300)
	f.processing("invoice_paid", 360, 300)
	f.processing("invoice_paid", 1200, 300)
	f.failed("payment_failed", 600, "card declined: insufficient funds\ngoroutine 7 [running]:\nmain.handle()")
	f.failed("payment_failed", 3*3600, "gateway timeout")
	return db, f
}

func TestStatusText(t *testing.T) {
	t.Parallel()
	db, _ := scenario(t)
	r := runOps(runStatus, "--dsn", db.DSN)
	mustExit(t, r, opsExitOK) // without --check, problems do not change the exit code
	// One line per type with PENDING DUE PROCESSING STALE STUCK FAILED HELD.
	wantRows := map[string][]string{
		"welcome_email":  {"4", "3", "0", "0", "0", "0", "0"},
		"invoice_paid":   {"0", "0", "3", "2", "1", "0", "0"},
		"payment_failed": {"0", "0", "0", "0", "0", "2", "0"},
		"total":          {"4", "3", "3", "2", "1", "2", "0"},
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(r.stdout, "\n") {
		fields := strings.Fields(line)
		if len(fields) < 8 {
			continue
		}
		if want, ok := wantRows[fields[0]]; ok {
			seen[fields[0]] = true
			if !reflect.DeepEqual(fields[1:8], want) {
				t.Errorf("row %s = %v, want %v\n%s", fields[0], fields[1:8], want, r.stdout)
			}
		}
	}
	if len(seen) != len(wantRows) {
		t.Errorf("rows seen %v, want %d rows\n%s", seen, len(wantRows), r.stdout)
	}
	for _, want := range []string{
		"oldest pending:  2h",                         // the row whose created_at was set 2h back
		"NOBODY IS RECLAIMING",                        // stuck > 0 is spelled out
		"failed in 1h:    1",                          // only the 10m-old failure is in the window
		"card declined: insufficient funds goroutine", // last_error on one line
		"check: FAILING",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("status output lacks %q:\n%s", want, r.stdout)
		}
	}
	// SENT rows are never counted: no column for them.
	if header := strings.SplitN(r.stdout, "\n", 2)[0]; !strings.HasPrefix(header, "EVENT TYPE") || strings.Contains(header, "SENT") {
		t.Errorf("header = %q; want EVENT TYPE first and no SENT column", header)
	}
	// Newest failure first.
	i10m, i3h := strings.Index(r.stdout, "card declined"), strings.Index(r.stdout, "gateway timeout")
	if i10m < 0 || i3h < 0 || i10m > i3h {
		t.Errorf("want both failures listed, the 10m-old one first:\n%s", r.stdout)
	}
}

func TestStatusJSON(t *testing.T) {
	t.Parallel()
	db, _ := scenario(t)
	r := runOps(runStatus, "--dsn", db.DSN, "--json", "--failed", "1")
	mustExit(t, r, opsExitOK)
	var rep statusReport
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("--json output does not parse into the documented shape: %v\n%s", err, r.stdout)
	}
	if rep.Pending != 4 || rep.Due != 3 || rep.Processing != 3 || rep.Stale != 2 || rep.Stuck != 1 || rep.Failed != 2 {
		t.Errorf("totals = %+v; want pending 4, due 3, processing 3, stale 2, stuck 1, failed 2", rep)
	}
	if rep.OldestPendingSeconds < 7190 || rep.OldestPendingSeconds > 7300 {
		t.Errorf("oldest_pending_seconds = %v, want about 7200", rep.OldestPendingSeconds)
	}
	wantTypes := map[string]typeReport{
		"welcome_email":  {Pending: 4, Due: 3},
		"invoice_paid":   {Processing: 3, Stale: 2, Stuck: 1},
		"payment_failed": {Failed: 2},
	}
	for typ, want := range wantTypes {
		got := rep.ByType[typ]
		if got.OldestDueSeconds > 60 {
			t.Errorf("by_type[%s].oldest_due_seconds = %v, want about 0 (due rows became due at enqueue)", typ, got.OldestDueSeconds)
		}
		got.OldestPendingSeconds, got.OldestDueSeconds = 0, 0
		if got != want {
			t.Errorf("by_type[%s] = %+v, want %+v", typ, got, want)
		}
	}
	if len(rep.ByType) != len(wantTypes) {
		t.Errorf("by_type has %d types, want %d (SENT-only types never appear)", len(rep.ByType), len(wantTypes))
	}
	if len(rep.NewestFailed) != 1 || rep.NewestFailed[0].EventType != "payment_failed" ||
		!strings.HasPrefix(rep.NewestFailed[0].LastError, "card declined") || rep.NewestFailed[0].FailedAt.IsZero() {
		t.Errorf("newest_failed = %+v; want the one 10m-old failure (--failed 1)", rep.NewestFailed)
	}
	if rep.Check.OK || rep.Check.FailedInWindow != 1 || rep.Check.WindowSeconds != 3600 || len(rep.Check.Problems) != 2 {
		t.Errorf("check = %+v; want not ok, 1 failure within 3600s, two problems (stuck, failed)", rep.Check)
	}
	// The key names are the documented contract (docs/operations.md).
	var raw map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &raw); err != nil {
		t.Fatal(err)
	}
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	want := []string{"broken", "broken_keys", "by_type", "cancelled", "check", "due", "failed", "held", "held_keys", "newest_failed", "oldest_due_seconds", "oldest_held_seconds", "oldest_pending_seconds", "oldest_sent_seconds", "paused", "pending", "processing", "purge", "stale", "stuck"}
	if !reflect.DeepEqual(keys, want) {
		t.Errorf("top-level keys = %v, want %v", keys, want)
	}
}

func TestStatusCheck(t *testing.T) {
	t.Parallel()
	type setup func(f fixtures)
	cases := []struct {
		name  string
		setup setup
		args  []string
		want  int
	}{
		{"empty table", func(fixtures) {}, nil, opsExitOK},
		{"healthy: pending, processing in lease, old sent", func(f fixtures) {
			f.enqueue("a")
			f.processing("a", 10, 300)
			f.sent("a", 3600)
		}, nil, opsExitOK},
		{"stale but not stuck: a reclaimer will take it", func(f fixtures) { f.processing("a", 400, 300) }, nil, opsExitOK},
		{"stuck", func(f fixtures) { f.processing("a", 1000, 300) }, nil, opsExitCheck},
		{"failed within the window", func(f fixtures) { f.failed("a", 600, "boom") }, nil, opsExitCheck},
		{"failed before the window", func(f fixtures) { f.failed("a", 2*3600, "boom") }, nil, opsExitOK},
		{"failed before a 1h window, inside a 1d window", func(f fixtures) { f.failed("a", 2*3600, "boom") }, []string{"--window", "1d"}, opsExitCheck},
		{"failed 10m ago, 5m window", func(f fixtures) { f.failed("a", 600, "boom") }, []string{"--window", "5m"}, opsExitOK},
		// Every worker down: nothing is PROCESSING, so nothing is stuck, but due rows wait.
		{"due for 20m: nobody claims", func(f fixtures) { f.dueSince("a", 1200) }, nil, opsExitCheck},
		{"due for 20m, --max-due-age 1h", func(f fixtures) { f.dueSince("a", 1200) }, []string{"--max-due-age", "1h"}, opsExitOK},
		{"due for 20m, --max-due-age 0 (off)", func(f fixtures) { f.dueSince("a", 1200) }, []string{"--max-due-age", "0"}, opsExitOK},
		{"enqueued 2h ago with a 3h delay: pending, not due", func(f fixtures) {
			id := f.enqueue("a", outbox.Delay(time.Hour))
			f.db.MustExec(f.t, "UPDATE outbox_messages SET created_at = TIMESTAMPADD(HOUR, -2, created_at) WHERE id = ?", id)
		}, nil, opsExitOK},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			db := testdb.Migrated(t)
			c.setup(fixtures{t: t, db: db})
			for _, asJSON := range []bool{false, true} {
				args := append([]string{"--dsn", db.DSN, "--check"}, c.args...)
				if asJSON {
					args = append(args, "--json")
				}
				r := runOps(runStatus, args...)
				if r.code != c.want {
					t.Errorf("json=%v: want exit %d, got %s", asJSON, c.want, r)
				}
				if r.stderr != "" {
					t.Errorf("json=%v: stderr not empty: %q", asJSON, r.stderr)
				}
			}
		})
	}
}

func TestNewestFailedFindsTheNewest(t *testing.T) {
	t.Parallel()
	db := testdb.Migrated(t)
	f := fixtures{t: t, db: db}
	// More failures than one listing loads, spread over days, with the newest in a cluster.
	var ids []outbox.MessageID // newest first
	for _, ago := range []int{5, 6, 7, 8} {
		ids = append(ids, f.failed("a", ago, "recent"))
	}
	for i := 0; i < 250; i++ {
		f.failed("a", 3600+i*600, "older")
	}
	ctx := context.Background()
	for _, n := range []int{1, 3, 4} {
		got, err := newestFailed(ctx, db, n)
		if err != nil {
			t.Fatal(err)
		}
		var gotIDs []outbox.MessageID
		for _, m := range got {
			gotIDs = append(gotIDs, m.ID)
		}
		if !reflect.DeepEqual(gotIDs, ids[:n]) {
			t.Errorf("newestFailed(%d) = %v, want %v", n, gotIDs, ids[:n])
		}
	}
	got, err := newestFailed(ctx, db, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 10 || got[0].ID != ids[0] || got[4].LastError != "older" {
		t.Errorf("newestFailed(10): %d rows, first %v; want 10, the newest first, then older ones", len(got), got)
	}
	for i := 1; i < len(got); i++ {
		if got[i].FailedAt.After(got[i-1].FailedAt) {
			t.Errorf("newestFailed(10) not newest first at %d: %v after %v", i, got[i].FailedAt, got[i-1].FailedAt)
		}
	}

	// A cluster of more failures than one listing loads, all with one failed_at (a bulk
	// update), under two newer ones: the two, then one of the cluster.
	db2 := testdb.Migrated(t)
	f2 := fixtures{t: t, db: db2}
	newer := []outbox.MessageID{f2.failed("b", 5, "newer"), f2.failed("b", 6, "newer")}
	for i := 0; i < 150; i++ {
		f2.failed("b", 3600, "cluster")
	}
	db2.MustExec(t, "UPDATE outbox_messages SET failed_at = (SELECT MIN(failed_at) FROM (SELECT failed_at FROM outbox_messages) x) WHERE last_error = 'cluster'")
	got, err = newestFailed(ctx, db2, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].ID != newer[0] || got[1].ID != newer[1] || got[2].LastError != "cluster" {
		t.Errorf("newestFailed(3) over a cluster: %+v; want %v then one cluster row", got, newer)
	}
}

// A due wait past --max-due-age fails the check either way, and says which it is: nobody
// claims the type, or its workers claim (rows PROCESSING within their lease) but are behind.
func TestStatusCheckTellsIdleFromBehind(t *testing.T) {
	t.Parallel()
	db := testdb.Migrated(t)
	f := fixtures{t: t, db: db}
	f.dueSince("idle_type", 1200)
	f.dueSince("busy_type", 1200)
	f.processing("busy_type", 5, 300)
	r := runOps(runStatus, "--dsn", db.DSN, "--check", "--json")
	mustExit(t, r, opsExitCheck)
	var rep statusReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	all := strings.Join(rep.Check.Problems, "\n")
	if !strings.Contains(all, "nobody claims them: are the workers for idle_type running?") ||
		!strings.Contains(all, "the workers for busy_type are claiming but behind") {
		t.Errorf("problems = %q", rep.Check.Problems)
	}
}

// status shows held ordering keys (text and --json), each counted in its head's event type's
// HELD column (not in the type of a message waiting behind it), and --check fails past
// --max-held-age.
func TestStatusHeldKeys(t *testing.T) {
	t.Parallel()
	db := testdb.Migrated(t)
	ctx := context.Background()
	var head outbox.MessageID
	for i, typ := range []string{"order_paid", "order_paid", "order_shipped"} {
		err := outbox.InTx(ctx, db.DB, func(tx *sql.Tx) error {
			id, err := outbox.Enqueue(ctx, tx, outbox.Message{EventType: typ, Payload: json.RawMessage(`{}`), OrderingKey: "orders:42"})
			if i == 0 {
				head = id
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// The head failed an hour ago; two messages have waited behind it since.
	db.MustExec(t, "UPDATE outbox_messages SET status='FAILED', attempts=10, failed_at=UTC_TIMESTAMP(6) - INTERVAL 1 HOUR WHERE id = ?", int64(head))
	db.MustExec(t, "UPDATE outbox_messages SET created_at = UTC_TIMESTAMP(6) - INTERVAL 1 HOUR WHERE id <> ?", int64(head))
	r := runOps(runStatus, "--dsn", db.DSN, "--failed", "0", "--window", "1m")
	mustExit(t, r, opsExitOK)
	if !strings.Contains(r.stdout, "held keys:       1") {
		t.Errorf("status without the held key:\n%s", r.stdout)
	}
	// The HELD column (after FAILED) and the held list's line: key, head, head type, status, waiting.
	wantFields := map[string][]string{
		"order_paid": {"1", "0", "0", "0", "0", "1", "1"}, "order_shipped": {"1", "0", "0", "0", "0", "0", "0"},
		"total": {"2", "0", "0", "0", "0", "1", "1"}, "orders:42": {strconv.FormatInt(int64(head), 10), "order_paid", "FAILED", "2"},
	}
	for _, line := range strings.Split(r.stdout, "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if want, ok := wantFields[fields[0]]; ok {
			delete(wantFields, fields[0])
			if len(fields) < 1+len(want) || !reflect.DeepEqual(fields[1:1+len(want)], want) {
				t.Errorf("line %q, want %s then %v\n%s", line, fields[0], want, r.stdout)
			}
		}
	}
	if len(wantFields) > 0 {
		t.Errorf("no line for %v in:\n%s", wantFields, r.stdout)
	}
	r = runOps(runStatus, "--dsn", db.DSN, "--json", "--check", "--window", "1m", "--max-held-age", "30m")
	mustExit(t, r, opsExitCheck)
	var rep statusReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.HeldKeys != 1 || len(rep.Held) != 1 || rep.Held[0].HeadID != int64(head) || rep.Held[0].HeadEventType != "order_paid" ||
		rep.Held[0].Waiting != 2 || rep.Held[0].HeldSeconds < 3500 || rep.Due != 0 {
		t.Errorf("--json held = %d %+v, due %d; want one key held about an hour by %d (order_paid) with 2 waiting, nothing due", rep.HeldKeys, rep.Held, rep.Due, head)
	}
	if rep.ByType["order_paid"].Held != 1 || rep.ByType["order_shipped"].Held != 0 || !strings.Contains(r.stdout, `"held": 1,`) {
		t.Errorf("--json by_type held: order_paid %+v, order_shipped %+v; want 1 and 0\n%s", rep.ByType["order_paid"], rep.ByType["order_shipped"], r.stdout)
	}
	if len(rep.Check.Problems) != 1 || !strings.Contains(rep.Check.Problems[0], "1 ordering key(s) held, the oldest for more than 30m") {
		t.Errorf("check problems %q", rep.Check.Problems)
	}
	// Within the limit: ok.
	mustExit(t, runOps(runStatus, "--dsn", db.DSN, "--check", "--window", "1m", "--max-held-age", "2h"), opsExitOK)
}

// On a database without the tables, the operator commands say to migrate
// instead of printing the server's "doesn't exist" (status at every probe of a dead fleet would
// otherwise read like an outage).
func TestOpsOnUnmigratedDatabaseSayMigrate(t *testing.T) {
	t.Parallel()
	db := testdb.New(t) // a database of its own, no tables
	for name, c := range map[string]struct {
		fn   opsFunc
		args []string
	}{
		"status":       {runStatus, []string{"--dsn", db.DSN}},
		"status check": {runStatus, []string{"--dsn", db.DSN, "--check", "--json"}},
		"show":         {runShow, []string{"--dsn", db.DSN, "--id", "1"}},
		"retry":        {runRetry, []string{"--dsn", db.DSN, "--id", "1"}},
		"purge":        {runPurge, []string{"--dsn", db.DSN, "--older-than", "7d"}},
	} {
		r := runOps(c.fn, c.args...)
		if r.code == opsExitOK || !strings.Contains(r.stderr, "run outboxgen migrate") {
			t.Errorf("%s: want a failure that says to run outboxgen migrate, got %s", name, r)
		}
		if strings.Contains(r.stderr, "doesn't exist") && !strings.Contains(r.stderr, "migrate") {
			t.Errorf("%s: the server's error without the advice: %q", name, r.stderr)
		}
	}
}

// One ordered PENDING row without its queue entry, alone under its type, does not take status
// down (it exited 3 on a NULL sum): the key is listed as broken (text and --json, the key's
// terminal controls escaped), and --check fails on it.
func TestStatusBrokenKeys(t *testing.T) {
	t.Parallel()
	db := testdb.Migrated(t)
	unqueued := db.BrokenKey(t, "acct:\x1b[31m7", "odd_type", testdb.BrokenNotQueued, 5)
	sent := db.BrokenKey(t, "acct:8", "other_type", testdb.BrokenHeadSent, 5)
	r := runOps(runStatus, "--dsn", db.DSN)
	mustExit(t, r, opsExitOK)
	if strings.Contains(r.stdout, "\x1b") {
		t.Errorf("status printed a raw ESC from an ordering key:\n%q", r.stdout)
	}
	for _, want := range []string{
		"broken keys:     2 (a row was changed by hand",
		`acct:\x1b[31m7  1    ` + strconv.FormatInt(unqueued, 10),
		"PENDING  not_queued",
		"acct:8",
		"SENT     head_finished",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("status lacks %q:\n%s", want, r.stdout)
		}
	}
	r = runOps(runStatus, "--dsn", db.DSN, "--json", "--check")
	mustExit(t, r, opsExitCheck)
	var rep statusReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	want := []brokenReport{
		{OrderingKey: "acct:8", Seq: 1, MessageID: sent, EventType: "other_type", Status: "SENT", Reason: "head_finished"},
		{OrderingKey: "acct:\x1b[31m7", Seq: 1, MessageID: unqueued, EventType: "odd_type", Status: "PENDING", Reason: "not_queued"},
	}
	if rep.BrokenKeys != 2 || !reflect.DeepEqual(rep.Broken, want) {
		t.Errorf("--json broken = %d %+v, want 2 %+v", rep.BrokenKeys, rep.Broken, want)
	}
	if tc := rep.ByType["odd_type"]; tc.Pending != 1 || tc.Due != 0 {
		t.Errorf("odd_type = %+v, want 1 pending, 0 due", tc)
	}
	if len(rep.Check.Problems) != 1 || !strings.Contains(rep.Check.Problems[0], "2 ordering key(s) broken") {
		t.Errorf("check problems %q, want the broken keys", rep.Check.Problems)
	}
}

// A paused type's due messages wait on purpose: status --check stays green for them, says so
// in the text, and still fails for a type nobody claims.
func TestStatusCheckPassesOverPausedTypes(t *testing.T) {
	t.Parallel()
	db := testdb.Migrated(t)
	f := fixtures{t: t, db: db}
	f.dueSince("held_back", 1200)
	if err := outbox.Pause(context.Background(), db.DB, "held_back", outbox.PauseOptions{Reason: "provider down"}); err != nil {
		t.Fatal(err)
	}
	r := runOps(runStatus, "--dsn", db.DSN, "--check")
	mustExit(t, r, 0)
	if !strings.Contains(r.stdout, "held_back") || !strings.Contains(r.stdout, "paused") {
		t.Errorf("status does not show the pause:\n%s", r.stdout)
	}

	f.dueSince("idle_type", 1200)
	r = runOps(runStatus, "--dsn", db.DSN, "--check", "--json")
	mustExit(t, r, opsExitCheck)
	var rep statusReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	all := strings.Join(rep.Check.Problems, "\n")
	if !strings.Contains(all, "idle_type") || strings.Contains(all, "held_back") {
		t.Errorf("problems = %q, want idle_type only", rep.Check.Problems)
	}
}
