package outboxconsole

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/outboxgen/outboxgen/internal/testdb"
	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// TestOverviewMatchesStats builds a table in every state and reads the overview: each type's
// row and the totals show what outbox.Stats says, and the alerts are worded like
// `outboxgen status --check`.
//
//	welcome_email   3 due PENDING (one due since 20m: nobody claims), 1 delayed 1h, 2 SENT
//	invoice_paid    PROCESSING: 1 healthy, 1 stale (lease 5m ended 1m ago), 1 stuck (claimed
//	                20m ago with a 5m lease)
//	payment_failed  FAILED 10m ago and 3h ago
func TestOverviewMatchesStats(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.insert("welcome_email", "PENDING", `{}`, 0, secs(-1200), nil, nil, nil, nil, nil, "")
	b.enqueue("welcome_email", `{"n":1}`)
	b.enqueue("welcome_email", `{"n":2}`)
	b.enqueue("welcome_email", `{"n":3}`, outbox.Delay(3600e9))
	b.sent("welcome_email", 60)
	b.sent("welcome_email", 8*86400)
	b.processing("invoice_paid", 60, 300)
	b.processing("invoice_paid", 360, 300)
	b.processing("invoice_paid", 1200, 300)
	b.failed("payment_failed", 600, "card declined")
	b.failed("payment_failed", 3*3600, "gateway timeout")

	r := b.get("/")
	if r.status != 200 {
		t.Fatalf("GET / = %d\n%s", r.status, r.body)
	}
	snap, err := outbox.Stats(context.Background(), b.db)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.ByType) != 3 {
		t.Fatalf("the scenario should give 3 types, Stats gives %+v", snap.ByType)
	}
	for typ, tc := range snap.ByType {
		cells := rowCells(t, r.body, typ)
		want := []string{typ}
		for _, n := range []int64{tc.Pending, tc.Due, tc.Processing, tc.Stale, tc.Stuck, tc.Failed, tc.Held} {
			want = append(want, strconv.FormatInt(n, 10))
		}
		if got := cells[:8]; strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("row %s = %v, want %v (outbox.Stats)", typ, got, want)
		}
	}
	// The scripted numbers themselves, so that a Stats that drifted would not pass along.
	for id, want := range map[string]int64{
		"total-pending": 4, "total-due": 3, "total-processing": 3, "total-stale": 2, "total-stuck": 1, "total-failed": 2,
	} {
		if !regexp.MustCompile(fmt.Sprintf(`id="%s"[^>]*>%d<`, id, want)).MatchString(r.body) {
			t.Errorf("total %s is not %d:\n%s", id, want, r.body)
		}
	}
	if got := rowCells(t, r.body, "welcome_email")[9]; !regexp.MustCompile(`^20m([0-9]+s)?$`).MatchString(got) {
		t.Errorf("welcome_email's oldest due = %q, want 20m and some seconds", got)
	}
	b.mustContain(r,
		"1 message(s) stuck PROCESSING past 3x their lease: nobody is reclaiming",
		"due messages have waited more than 10m and nobody claims them: are the workers for welcome_email running?",
		"1 message(s) FAILED within the last 1h",
		"1 message(s) PROCESSING past their lease: their worker died or hung; a live worker reclaims them",
		`<a href="failed?type=payment_failed">2</a>`,
	)
	if strings.Contains(r.body, "SENT") && strings.Contains(r.body, "<th class=\"num\">sent") {
		t.Error("the overview counts SENT rows; it must not (that part of the table grows without bound)")
	}
}

// TestOverviewHealthy: an empty table says so, and no alert.
func TestOverviewHealthy(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.get("/")
	if r.status != 200 {
		t.Fatalf("GET / = %d", r.status)
	}
	b.mustContain(r, "check: ok", "the outbox is empty")
	if strings.Contains(r.body, "ALERT") {
		t.Errorf("an empty outbox raised an alert:\n%s", r.body)
	}
}

// TestOverviewBehindNotIdle: a type whose workers claim (rows PROCESSING within their lease)
// but whose due rows wait is "claiming but behind", not "nobody claims".
func TestOverviewBehindNotIdle(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.insert("bulk", "PENDING", `{}`, 0, secs(-1800), nil, nil, nil, nil, nil, "")
	b.processing("bulk", 5, 300)
	r := b.get("/")
	b.mustContain(r, "due messages have waited more than 10m: the workers for bulk are claiming but behind")
	if strings.Contains(r.body, "nobody claims them") {
		t.Errorf("a busy fleet was reported as idle:\n%s", r.body)
	}
}

// TestOverviewReadOnlyHasNoButtons: without AllowWrites no form posts anywhere and no CSRF
// token is on the page.
func TestOverviewReadOnlyHasNoButtons(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.failed("payment_failed", 60, "x")
	for _, path := range []string{"/", "/failed", fmt.Sprintf("/message?id=%d", id)} {
		r := b.get(path)
		if strings.Contains(r.body, `method="post"`) || strings.Contains(r.body, b.c.csrf) {
			t.Errorf("read-only %s has a write form or the CSRF token:\n%s", path, r.body)
		}
		b.mustContain(r, "read-only")
	}
}

// TestHeldKeysAndHeaders: a FAILED head that holds its ordering key while a message of another
// type waits is listed with its type and alerted on (worded like status --check), and counted in
// the head's type's held column only; the message page shows the ordering key and the headers,
// escaped.
func TestHeldKeysAndHeaders(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	const key = "orders:<b>42</b>"
	head, err := outbox.Enqueue(ctx, b.db, outbox.Message{EventType: "order_paid", Payload: []byte(`{"n":1}`), OrderingKey: key},
		outbox.Standalone(), outbox.Header("x-tenant", "<i>acme</i>"))
	if err != nil {
		t.Fatal(err)
	}
	next, err := outbox.Enqueue(ctx, b.db, outbox.Message{EventType: "order_shipped", Payload: []byte(`{"n":2}`), OrderingKey: key}, outbox.Standalone())
	if err != nil {
		t.Fatal(err)
	}
	b.db.MustExec(t, "UPDATE outbox_messages SET status = 'FAILED', failed_at = UTC_TIMESTAMP(6), last_error = 'x' WHERE id = ?", int64(head))
	b.db.MustExec(t, "UPDATE outbox_messages SET created_at = TIMESTAMPADD(MINUTE, -20, created_at) WHERE id = ?", int64(next))
	snap, err := outbox.Stats(ctx, b.db)
	if err != nil || snap.HeldKeys != 1 {
		t.Fatalf("Stats: %d held keys, %v; the scenario should hold 1", snap.HeldKeys, err)
	}
	r := b.get("/")
	b.mustContain(r, `id="held-keys">1<`,
		"1 ordering key(s) held, the oldest for more than 10m: retry or purge their head messages",
		`<td class="type">orders:&lt;b&gt;42&lt;/b&gt;</td>`, fmt.Sprintf(`<a href="message?id=%d">%d</a></td><td class="type">order_paid</td>`, head, head))
	// The held column (the 8th cell, after failed): the key under its head's type, not the waiting one's.
	for typ, want := range map[string]string{"order_paid": "1", "order_shipped": "0"} {
		if got := rowCells(t, r.body, typ)[7]; got != want {
			t.Errorf("%s's held = %q, want %s (a key counts under its head message's type)", typ, got, want)
		}
	}
	m := b.get(fmt.Sprintf("/message?id=%d", head))
	b.mustContain(m, "<code>orders:&lt;b&gt;42&lt;/b&gt;</code>", "<code>x-tenant</code>", "<code>&lt;i&gt;acme&lt;/i&gt;</code>")
	for _, body := range []string{r.body, m.body} {
		if strings.Contains(body, "<b>42") || strings.Contains(body, "<i>acme") {
			t.Errorf("raw markup from an ordering key or header:\n%s", body)
		}
	}
}

// TestOverviewBrokenKeys: one ordered PENDING row without its queue entry, alone under its
// type, once made the overview and the Failed page answer 503 (Stats failed on a NULL sum).
// Now both answer, and the overview lists the broken keys, escaped, with an alert worded like
// status --check; a missing head message is shown without a link.
func TestOverviewBrokenKeys(t *testing.T) {
	t.Parallel()
	b := setup(t)
	unqueued := b.db.BrokenKey(t, "acct:<b>1</b>", "odd_type", testdb.BrokenNotQueued, 5)
	missing := b.db.BrokenKey(t, "acct:2", "other_type", testdb.BrokenHeadMissing, 5) // odd_type holds only the odd row
	r := b.get("/")
	if r.status != 200 {
		t.Fatalf("GET / = %d\n%s", r.status, r.body)
	}
	b.mustContain(r, `id="broken-keys">2<`,
		"2 ordering key(s) broken: a row was changed by hand and the key cannot move until a running worker repairs it",
		`<td class="type">acct:&lt;b&gt;1&lt;/b&gt;</td><td class="num">1</td><td class="num">`+fmt.Sprintf(`<a href="message?id=%d">%d</a>`, unqueued, unqueued),
		`<span class="status st-PENDING">PENDING</span></td><td>not_queued</td>`,
		fmt.Sprintf(`<td class="num">%d (gone)</td><td class="type"></td><td>-</td><td>head_missing</td>`, missing),
	)
	if strings.Contains(r.body, "<b>1") {
		t.Errorf("raw markup from an ordering key:\n%s", r.body)
	}
	if got := rowCells(t, r.body, "odd_type")[1:3]; strings.Join(got, "|") != "1|0" {
		t.Errorf("odd_type pending|due = %v, want 1|0", got)
	}
	if f := b.get("/failed"); f.status != 200 {
		t.Errorf("GET /failed = %d\n%s", f.status, f.body)
	}
}
