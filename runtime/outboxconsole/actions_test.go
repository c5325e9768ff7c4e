package outboxconsole

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// TestWritesRefusedReadOnly: without AllowWrites, a retry and a purge with every other check
// satisfied (the console's CSRF token, same origin, confirm) are refused with 403, change
// nothing, and are logged as refused.
func TestWritesRefusedReadOnly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.failed("payment_failed", 60, "boom")
	for _, action := range []string{"/retry", "/purge"} {
		form := csrfField(b.c)
		form.Set("id", strconv.FormatInt(int64(id), 10))
		form.Set("confirm", "1")
		r := b.post(action, form)
		if r.status != http.StatusForbidden || !strings.Contains(r.body, "read-only console") {
			t.Errorf("POST %s on a read-only console = %d, want 403 saying it is read-only:\n%s", action, r.status, r.body)
		}
	}
	if s := b.status(id); s != "FAILED" {
		t.Errorf("message is %s after refused writes, want FAILED", s)
	}
	if !strings.Contains(b.logs.String(), `msg="console write refused"`) || !strings.Contains(b.logs.String(), "remote_addr=127.0.0.1") {
		t.Errorf("refused writes were not logged with the remote address:\n%s", b.logs)
	}
}

// TestWritesRefusedWithoutCSRF: with writes allowed, a post without the CSRF token, with a
// wrong one, from another origin, or marked cross-site by the browser is refused and changes
// nothing; the same post from the console's own page goes through. The control at the end
// shows the refusals are the checks', not a broken form.
func TestWritesRefusedWithoutCSRF(t *testing.T) {
	t.Parallel()
	b := setup(t, AllowWrites())
	id := b.failed("payment_failed", 60, "boom")
	sel := func(csrf string) url.Values {
		v := url.Values{"id": {strconv.FormatInt(int64(id), 10)}, "confirm": {"1"}}
		if csrf != "" {
			v.Set("csrf", csrf)
		}
		return v
	}
	cases := []struct {
		name   string
		form   url.Values
		header []string
		want   string
	}{
		{"no token", sel(""), nil, "CSRF token"},
		{"wrong token", sel(strings.Repeat("0", len(b.c.csrf))), nil, "CSRF token"},
		{"a token one character short", sel(b.c.csrf[:len(b.c.csrf)-1]), nil, "CSRF token"},
		{"another origin", sel(b.c.csrf), []string{"Origin", "http://evil.example", "Sec-Fetch-Site", ""}, "cross-origin"},
		{"opaque origin", sel(b.c.csrf), []string{"Origin", "null", "Sec-Fetch-Site", ""}, "cross-origin"},
		{"cross-site fetch", sel(b.c.csrf), []string{"Sec-Fetch-Site", "cross-site", "Origin", ""}, "cross-site"},
		{"same-site but not same-origin", sel(b.c.csrf), []string{"Sec-Fetch-Site", "same-site"}, "cross-site"},
	}
	for _, tc := range cases {
		for _, action := range []string{"/retry", "/purge"} {
			r := b.post(action, tc.form, tc.header...)
			if r.status != http.StatusForbidden || !strings.Contains(r.body, tc.want) {
				t.Errorf("%s: POST %s = %d, want 403 mentioning %q:\n%s", tc.name, action, r.status, tc.want, r.body)
			}
		}
	}
	if s := b.status(id); s != "FAILED" {
		t.Fatalf("message is %s after refused writes, want FAILED", s)
	}
	// A plain client without Origin or Sec-Fetch-Site (curl) is left to the token.
	r := b.post("/retry", sel(b.c.csrf), "Origin", "", "Sec-Fetch-Site", "")
	if r.status != http.StatusSeeOther {
		t.Fatalf("the same retry from the console's own page = %d, want 303:\n%s", r.status, r.body)
	}
	if s := b.status(id); s != "PENDING" {
		t.Errorf("message is %s after the accepted retry, want PENDING", s)
	}
}

// TestRetryOneConfirmed walks the message page's flow: Retry shows the dry run's count and
// changes nothing; Confirm moves the message, redirects to it, and logs who, what, how many.
func TestRetryOneConfirmed(t *testing.T) {
	t.Parallel()
	b := setup(t, AllowWrites())
	id := b.failed("payment_failed", 60, "boom")
	other := b.failed("payment_failed", 60, "boom")
	idStr := strconv.FormatInt(int64(id), 10)

	page := b.get("/message?id=" + idStr)
	b.mustContain(page, `<form method="post" action="retry">`, `name="csrf" value="`+b.c.csrf+`"`)

	form := csrfField(b.c)
	form.Set("id", idStr)
	dry := b.post("/retry", form)
	if dry.status != 200 {
		t.Fatalf("dry run = %d:\n%s", dry.status, dry.body)
	}
	b.mustContain(dry, "Retry message "+idStr+"?", "Dry run: 1 of the 1 given message(s) are FAILED and would move.",
		`name="confirm" value="1"`, `name="id" value="`+idStr+`"`, "Retry 1 message(s)")
	if s := b.status(id); s != "FAILED" {
		t.Fatalf("the dry run moved the message to %s", s)
	}

	form.Set("confirm", "1")
	done := b.post("/retry", form)
	if done.status != http.StatusSeeOther || done.location != "message?id="+idStr+"&retried=1" {
		t.Fatalf("confirm = %d to %q, want 303 to message?id=%s&retried=1", done.status, done.location, idStr)
	}
	if s := b.status(id); s != "PENDING" {
		t.Errorf("retried message is %s, want PENDING", s)
	}
	if s := b.status(other); s != "FAILED" {
		t.Errorf("the other message is %s: a retry of one moved more", s)
	}
	after := b.get("/message?id=" + idStr + "&retried=1")
	b.mustContain(after, `id="status">PENDING<`, "Retried 1 message(s)", `data-refresh="3"`)
	log := b.logs.String()
	for _, want := range []string{`msg="console write"`, "remote_addr=127.0.0.1", "action=retry", "ids=[" + idStr + "]", "count=1"} {
		if !strings.Contains(log, want) {
			t.Errorf("the audit line lacks %q:\n%s", want, log)
		}
	}
}

// TestRetrySelectedAndByType: the failed list's selection and "retry all of a type" move
// exactly what they name.
func TestRetrySelectedAndByType(t *testing.T) {
	t.Parallel()
	b := setup(t, AllowWrites())
	a1 := b.failed("a", 60, "x")
	a2 := b.failed("a", 60, "x")
	a3 := b.failed("a", 60, "x")
	b1 := b.failed("b", 60, "x")
	b2 := b.failed("b", 60, "x")

	form := csrfField(b.c)
	form["id"] = []string{fmt.Sprint(a1), fmt.Sprint(b1), fmt.Sprint(a1)}
	dry := b.post("/retry", form)
	b.mustContain(dry, "Retry 2 selected message(s)?", "Dry run: 2 of the 2 given message(s)")
	form.Set("confirm", "1")
	done := b.post("/retry", form)
	if done.status != http.StatusSeeOther || done.location != "failed?retried=2" {
		t.Fatalf("confirm selected = %d to %q, want 303 to failed?retried=2", done.status, done.location)
	}

	form = csrfField(b.c)
	form.Set("type", "a")
	dry = b.post("/retry", form)
	b.mustContain(dry, "Retry every FAILED message of a?", "Dry run: 2 FAILED message(s) of this type would move.")
	form.Set("confirm", "1")
	done = b.post("/retry", form)
	if done.status != http.StatusSeeOther || done.location != "failed?retried=2&type=a" {
		t.Fatalf("confirm by type = %d to %q, want 303 to failed?retried=2&type=a", done.status, done.location)
	}
	for id, want := range map[outbox.MessageID]string{a1: "PENDING", a2: "PENDING", a3: "PENDING", b1: "PENDING", b2: "FAILED"} {
		if got := b.status(id); got != want {
			t.Errorf("message %v is %s, want %s", id, got, want)
		}
	}
	if !strings.Contains(b.logs.String(), "event_type=a count=2") {
		t.Errorf("the by-type retry's audit line lacks its type and count:\n%s", b.logs)
	}

	// Nothing selected: refused, nothing moves.
	r := b.post("/retry", csrfField(b.c))
	if r.status != http.StatusBadRequest {
		t.Errorf("a retry with nothing selected = %d, want 400", r.status)
	}
}

// TestPurgeByID: purge deletes the selected FAILED messages after the dry run, and leaves a
// selected message that is not FAILED alone.
func TestPurgeByID(t *testing.T) {
	t.Parallel()
	b := setup(t, AllowWrites())
	f := b.failed("a", 60, "x")
	p := b.enqueue("a", `{}`)
	form := csrfField(b.c)
	form["id"] = []string{fmt.Sprint(f), fmt.Sprint(p)}
	dry := b.post("/purge", form)
	b.mustContain(dry, "Purge 2 selected message(s)?", "Dry run: 1 of the 2 given message(s) are FAILED and would be deleted.", "cannot be undone")
	if b.status(f) != "FAILED" {
		t.Fatal("the purge's dry run deleted")
	}
	form.Set("confirm", "1")
	done := b.post("/purge", form)
	if done.status != http.StatusSeeOther || done.location != "failed?purged=1" {
		t.Fatalf("confirm purge = %d to %q, want 303 to failed?purged=1", done.status, done.location)
	}
	if b.status(f) != "gone" || b.status(p) != "PENDING" {
		t.Errorf("after the purge: FAILED one %s (want gone), PENDING one %s", b.status(f), b.status(p))
	}
	// Purge by type is not offered: a type's FAILED messages are discarded by id.
	byType := csrfField(b.c)
	byType.Set("type", "a")
	if r := b.post("/purge", byType); r.status != http.StatusBadRequest {
		t.Errorf("purge by type = %d, want 400", r.status)
	}
}

// TestMountedUnderPrefix: behind http.StripPrefix the pages link and redirect relatively, so
// the browser stays under the prefix.
func TestMountedUnderPrefix(t *testing.T) {
	t.Parallel()
	b := setup(t, AllowWrites())
	id := b.failed("a", 60, "x")
	mux := http.NewServeMux()
	mux.Handle("/admin/outbox/", http.StripPrefix("/admin/outbox", b.c))
	b.srv.Config.Handler = mux
	r := b.get("/admin/outbox/")
	if r.status != 200 || !strings.Contains(r.body, `href="static/style.css"`) || !strings.Contains(r.body, `href="failed"`) {
		t.Fatalf("GET /admin/outbox/ = %d, want the overview with relative links:\n%s", r.status, r.body)
	}
	if css := b.get("/admin/outbox/static/style.css"); css.status != 200 || !strings.Contains(css.header.Get("Content-Type"), "text/css") {
		t.Errorf("the stylesheet under the prefix = %d %s", css.status, css.header.Get("Content-Type"))
	}
	form := csrfField(b.c)
	form.Set("id", fmt.Sprint(id))
	form.Set("confirm", "1")
	done := b.post("/admin/outbox/retry", form)
	if done.status != http.StatusSeeOther || strings.HasPrefix(done.location, "/") {
		t.Errorf("redirect after a write under a prefix = %d %q, want a relative 303", done.status, done.location)
	}
}
