package outboxconsole

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// pauses returns the pauses in force by type.
func (b *bundle) pauses() map[string]outbox.PausedType {
	b.t.Helper()
	ps, err := outbox.Pauses(context.Background(), b.db)
	if err != nil {
		b.t.Fatal(err)
	}
	out := map[string]outbox.PausedType{}
	for _, p := range ps {
		out[p.EventType] = p
	}
	return out
}

// waiting says whether message id is PENDING and due later than the database clock, and its
// attempts.
func (b *bundle) waiting(id outbox.MessageID) (bool, int) {
	b.t.Helper()
	var later bool
	var attempts int
	if err := b.db.QueryRow(`SELECT next_attempt_at > UTC_TIMESTAMP(6), attempts FROM outbox_messages WHERE id = ?`,
		int64(id)).Scan(&later, &attempts); err != nil {
		b.t.Fatal(err)
	}
	return later, attempts
}

// backedOff writes a PENDING message that waits an hour for its fourth attempt.
func (b *bundle) backedOff(eventType string) outbox.MessageID {
	b.t.Helper()
	return b.insert(eventType, "PENDING", `{}`, 3, secs(-60), secs(3600), nil, nil, nil, nil, "timeout")
}

func idForm(c *Console, id outbox.MessageID, confirm bool) url.Values {
	f := csrfField(c)
	f.Set("id", strconv.FormatInt(int64(id), 10))
	if confirm {
		f.Set("confirm", "1")
	}
	return f
}

func typeForm(c *Console, eventType string, confirm bool) url.Values {
	f := csrfField(c)
	f.Set("typeref", c.types.seal(eventType))
	if confirm {
		f.Set("confirm", "1")
	}
	return f
}

// TestConsolePauseResume: the overview's Pause form on a type's row pauses it in the database
// with its reason and end; the banner then lists it, its hostile reason inert, with a Resume
// button whose post ends the pause. A type typed by name (no messages yet) can be paused too,
// and a bad duration or no type is refused with 400, changing nothing.
func TestConsolePauseResume(t *testing.T) {
	t.Parallel()
	b := setup(t, AllowWrites())
	b.enqueue("welcome_email", `{}`)
	const reason = "provider down <script>alert(1)</script> \x1b[2J\u202e"

	page := b.get("/")
	b.mustContain(page, `action="pause"`, `name="typeref" value="`+b.c.types.seal("welcome_email")+`"`, `class="pause-button"`)

	form := typeForm(b.c, "welcome_email", false)
	form.Set("reason", reason)
	form.Set("for", "15m")
	r := b.post("/pause", form)
	if r.status != http.StatusSeeOther || !strings.HasPrefix(r.location, "./?paused=") {
		t.Fatalf("POST /pause = %d to %q, want 303 to the overview:\n%s", r.status, r.location, r.body)
	}
	p, ok := b.pauses()["welcome_email"]
	if !ok || p.Reason != strings.TrimSpace(reason) || p.Until.IsZero() || p.Left <= 14*time.Minute || p.Left > 15*time.Minute {
		t.Fatalf("after the pause: %+v (paused %v), want welcome_email paused for 15m with the reason", p, ok)
	}
	if !strings.Contains(b.logs.String(), `action=pause event_type=welcome_email for=15m0s`) {
		t.Errorf("no audit line for the pause:\n%s", b.logs)
	}

	page = b.get("/" + strings.TrimPrefix(r.location, "./"))
	b.mustContain(page, `id="notice">Paused welcome_email: workers stop claiming it`, `data-paused="welcome_email"`,
		"provider down &lt;script&gt;alert(1)&lt;/script&gt; \\u001B[2J\\u202E", `action="resume"`, `class="resume"`)
	for _, raw := range []string{"<script>alert", "\x1b", "\u202e"} {
		if strings.Contains(page.body, raw) {
			t.Errorf("the page holds %q raw", raw)
		}
	}
	if cells := rowCells(t, page.body, "welcome_email"); !strings.Contains(cells[len(cells)-1], "Resume") ||
		strings.Contains(cells[len(cells)-1], "Pause") {
		t.Errorf("the paused type's row offers %q, want Resume and no Pause", cells[len(cells)-1])
	}

	r = b.post("/resume", typeForm(b.c, "welcome_email", false))
	if r.status != http.StatusSeeOther || !strings.HasPrefix(r.location, "./?resumed=") {
		t.Fatalf("POST /resume = %d to %q, want 303 to the overview:\n%s", r.status, r.location, r.body)
	}
	if _, ok := b.pauses()["welcome_email"]; ok {
		t.Fatal("welcome_email is still paused after Resume")
	}
	b.mustContain(b.get("/"+strings.TrimPrefix(r.location, "./")), "Resumed welcome_email")

	// By name, a type with no messages, until Resume.
	byName := csrfField(b.c)
	byName.Set("type", "sms_<b>x</b>")
	if r = b.post("/pause", byName); r.status != http.StatusSeeOther {
		t.Fatalf("POST /pause by name = %d:\n%s", r.status, r.body)
	}
	if p, ok := b.pauses()["sms_<b>x</b>"]; !ok || !p.Until.IsZero() || p.Reason != "" {
		t.Fatalf("pause by name: %+v (paused %v), want paused until Resume, no reason", p, ok)
	}
	b.mustContain(b.get("/"), `data-paused="sms_&lt;b&gt;x&lt;/b&gt;"`, "ends at resume")

	// Refused: a bad duration, a negative one, no type, a reason too long.
	bad := []url.Values{}
	for _, d := range []string{"soon", "-5m", "0s", "0d", "99999999d"} {
		f := typeForm(b.c, "payment_failed", false)
		f.Set("for", d)
		bad = append(bad, f)
	}
	bad = append(bad, csrfField(b.c))
	long := typeForm(b.c, "payment_failed", false)
	long.Set("reason", strings.Repeat("x", 1001))
	bad = append(bad, long)
	for _, f := range bad {
		if r := b.post("/pause", f); r.status != http.StatusBadRequest {
			t.Errorf("POST /pause %v = %d, want 400:\n%s", f, r.status, r.body)
		}
	}
	if _, ok := b.pauses()["payment_failed"]; ok {
		t.Error("a refused pause paused payment_failed")
	}
}

// TestConsoleCancel: Cancel on a PENDING message's page shows the dry run's count and changes
// nothing; Confirm makes it CANCELLED. Cancel on a type's row cancels every PENDING message of
// that type after its dry run, and leaves other types and SENT rows alone.
func TestConsoleCancel(t *testing.T) {
	t.Parallel()
	b := setup(t, AllowWrites())
	one := b.enqueue("welcome_email", `{}`)
	msg := b.get("/message?id=" + strconv.FormatInt(int64(one), 10))
	b.mustContain(msg, `action="cancel"`, `id="cancel"`)

	r := b.post("/cancel", idForm(b.c, one, false))
	if r.status != http.StatusOK || b.status(one) != "PENDING" {
		t.Fatalf("dry run: %d, message %s; want 200 and PENDING:\n%s", r.status, b.status(one), r.body)
	}
	b.mustContain(r, "Cancel message "+strconv.FormatInt(int64(one), 10)+"?",
		"Dry run: 1 of the 1 given message(s) are PENDING or running and would be cancelled.", `name="confirm" value="1"`, "Cancel 1 message(s)")
	r = b.post("/cancel", idForm(b.c, one, true))
	want := "message?cancelled=1&id=" + strconv.FormatInt(int64(one), 10)
	if r.status != http.StatusSeeOther || r.location != want {
		t.Fatalf("confirm: %d to %q, want 303 to %q:\n%s", r.status, r.location, want, r.body)
	}
	if s := b.status(one); s != "CANCELLED" {
		t.Fatalf("message is %s after Cancel, want CANCELLED", s)
	}
	after := b.get("/" + r.location)
	b.mustContain(after, "Cancelled 1 message(s)", `st-CANCELLED`)
	if strings.Contains(after.body, `id="cancel"`) {
		t.Error("a CANCELLED message still offers Cancel")
	}

	// By type, from the overview's row.
	var mail []outbox.MessageID
	for i := 0; i < 3; i++ {
		mail = append(mail, b.enqueue("invoice_mail", `{}`))
	}
	sent := b.sent("invoice_mail", 5)
	other := b.enqueue("sms", `{}`)
	b.mustContain(b.get("/"), `action="cancel"`, "Cancel pending…")
	r = b.post("/cancel", typeForm(b.c, "invoice_mail", false))
	b.mustContain(r, "Cancel every PENDING message of invoice_mail?", "Dry run: 3 PENDING or running message(s) of this type would be cancelled.")
	if s := b.status(mail[0]); s != "PENDING" {
		t.Fatalf("the dry run changed a message to %s", s)
	}
	r = b.post("/cancel", typeForm(b.c, "invoice_mail", true))
	if r.status != http.StatusSeeOther || r.location != "./?cancelled=3" {
		t.Fatalf("confirm by type: %d to %q, want 303 to ./?cancelled=3:\n%s", r.status, r.location, r.body)
	}
	for _, id := range mail {
		if s := b.status(id); s != "CANCELLED" {
			t.Errorf("invoice_mail message %d is %s, want CANCELLED", id, s)
		}
	}
	if s, o := b.status(sent), b.status(other); s != "SENT" || o != "PENDING" {
		t.Errorf("the SENT message is %s and the other type's %s, want SENT and PENDING", s, o)
	}
	b.mustContain(b.get("/?cancelled=3"), "Cancelled 3 message(s)")
	if !strings.Contains(b.logs.String(), `action=cancel ids=[] event_type=invoice_mail count=3`) {
		t.Errorf("no audit line for the cancel by type:\n%s", b.logs)
	}
	// Nothing selected.
	if r := b.post("/cancel", csrfField(b.c)); r.status != http.StatusBadRequest {
		t.Errorf("POST /cancel with nothing selected = %d, want 400", r.status)
	}
}

// TestConsoleRunNow: Run now on a backed-off message's page and on a type's row makes the
// waiting PENDING messages due, after the dry run's count, with their attempts unchanged; a
// message of another type keeps waiting.
func TestConsoleRunNow(t *testing.T) {
	t.Parallel()
	b := setup(t, AllowWrites())
	one := b.backedOff("welcome_email")
	due := b.enqueue("welcome_email", `{}`)
	b.mustContain(b.get("/message?id="+strconv.FormatInt(int64(one), 10)), `id="runnow"`)
	if r := b.get("/message?id=" + strconv.FormatInt(int64(due), 10)); strings.Contains(r.body, `id="runnow"`) {
		t.Error("a due message offers Run now")
	}

	r := b.post("/runnow", idForm(b.c, one, false))
	b.mustContain(r, "Run message "+strconv.FormatInt(int64(one), 10)+" now?", "Dry run: 1 of the 1 given message(s) are PENDING and wait")
	if later, _ := b.waiting(one); !later {
		t.Fatal("the dry run made the message due")
	}
	r = b.post("/runnow", idForm(b.c, one, true))
	if want := "message?id=" + strconv.FormatInt(int64(one), 10) + "&rannow=1"; r.status != http.StatusSeeOther || r.location != want {
		t.Fatalf("confirm: %d to %q, want 303 to %q:\n%s", r.status, r.location, want, r.body)
	}
	if later, attempts := b.waiting(one); later || attempts != 3 || b.status(one) != "PENDING" {
		t.Fatalf("after Run now: waits %v, attempts %d, %s; want due now, 3 attempts, PENDING", later, attempts, b.status(one))
	}

	// By type, from the overview's row.
	a1, a2 := b.backedOff("invoice_mail"), b.backedOff("invoice_mail")
	other := b.backedOff("sms")
	b.mustContain(b.get("/"), `action="runnow"`, "Run 2 now…")
	r = b.post("/runnow", typeForm(b.c, "invoice_mail", false))
	b.mustContain(r, "Dry run: 2 PENDING message(s) of this type wait for a backoff or a delay")
	r = b.post("/runnow", typeForm(b.c, "invoice_mail", true))
	if r.status != http.StatusSeeOther || r.location != "./?rannow=2" {
		t.Fatalf("confirm by type: %d to %q, want 303 to ./?rannow=2:\n%s", r.status, r.location, r.body)
	}
	for _, id := range []outbox.MessageID{a1, a2} {
		if later, attempts := b.waiting(id); later || attempts != 3 {
			t.Errorf("invoice_mail message %d: waits %v, attempts %d; want due now, 3", id, later, attempts)
		}
	}
	if later, _ := b.waiting(other); !later {
		t.Error("Run now on invoice_mail made an sms message due")
	}
	b.mustContain(b.get("/?rannow=2"), "Made 2 waiting PENDING message(s) due now")
}

// controlPosts are the controls' posts, each with every field a browser would send, confirmed.
func controlPosts(b *bundle, id outbox.MessageID) map[string]url.Values {
	pause := typeForm(b.c, "welcome_email", false)
	pause.Set("reason", "x")
	return map[string]url.Values{
		"/pause":  pause,
		"/resume": typeForm(b.c, "paused_type", false),
		"/cancel": idForm(b.c, id, true),
		"/runnow": idForm(b.c, id, true),
	}
}

// controlsUnchanged fails unless no control changed the database: welcome_email not paused,
// paused_type still paused, and the message still PENDING and waiting.
func controlsUnchanged(b *bundle, id outbox.MessageID) {
	b.t.Helper()
	ps := b.pauses()
	if _, ok := ps["welcome_email"]; ok {
		b.t.Error("a refused pause paused welcome_email")
	}
	if _, ok := ps["paused_type"]; !ok {
		b.t.Error("a refused resume resumed paused_type")
	}
	if later, _ := b.waiting(id); !later || b.status(id) != "PENDING" {
		b.t.Errorf("a refused write changed the message: %s, waits %v", b.status(id), later)
	}
}

// TestControlsRefusedReadOnly: without AllowWrites the overview and the message page offer no
// control, and each control's post, every other check satisfied, is refused with 403 and
// changes nothing.
func TestControlsRefusedReadOnly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.backedOff("welcome_email")
	if err := outbox.Pause(context.Background(), b.db, "paused_type", outbox.PauseOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/", "/message?id=" + strconv.FormatInt(int64(id), 10)} {
		r := b.get(path)
		for _, action := range []string{`action="pause"`, `action="resume"`, `action="cancel"`, `action="runnow"`} {
			if strings.Contains(r.body, action) {
				t.Errorf("the read-only %s offers %s", path, action)
			}
		}
	}
	b.mustContain(b.get("/"), "<code>outboxgen resume</code> ends it")
	for path, form := range controlPosts(b, id) {
		r := b.post(path, form)
		if r.status != http.StatusForbidden || !strings.Contains(r.body, "read-only console") {
			t.Errorf("POST %s on a read-only console = %d, want 403 saying it is read-only:\n%s", path, r.status, r.body)
		}
	}
	controlsUnchanged(b, id)
	if n := strings.Count(b.logs.String(), `msg="console write refused"`); n != 4 {
		t.Errorf("%d refusals logged, want 4:\n%s", n, b.logs)
	}
}

// TestControlsRefusedWithoutCSRF: with writes allowed, each control's post without the CSRF
// token, with a wrong one, from another origin or marked cross-site is refused with 403 and
// changes nothing; a GET of a control's path is not a write. The same posts from the console's
// own page then go through, so the refusals are the checks'.
func TestControlsRefusedWithoutCSRF(t *testing.T) {
	t.Parallel()
	b := setup(t, AllowWrites())
	id := b.backedOff("welcome_email")
	if err := outbox.Pause(context.Background(), b.db, "paused_type", outbox.PauseOptions{}); err != nil {
		t.Fatal(err)
	}
	type attempt struct {
		name   string
		csrf   string
		header []string
		want   string
	}
	attempts := []attempt{
		{"no token", "", nil, "CSRF token"},
		{"wrong token", strings.Repeat("0", len(b.c.csrf)), nil, "CSRF token"},
		{"another origin", b.c.csrf, []string{"Origin", "http://evil.example", "Sec-Fetch-Site", ""}, "cross-origin"},
		{"cross-site fetch", b.c.csrf, []string{"Sec-Fetch-Site", "cross-site", "Origin", ""}, "cross-site"},
	}
	for _, a := range attempts {
		for path, form := range controlPosts(b, id) {
			if a.csrf == "" {
				form.Del("csrf")
			} else {
				form.Set("csrf", a.csrf)
			}
			r := b.post(path, form, a.header...)
			if r.status != http.StatusForbidden || !strings.Contains(r.body, a.want) {
				t.Errorf("%s: POST %s = %d, want 403 mentioning %q:\n%s", a.name, path, r.status, a.want, r.body)
			}
		}
	}
	for path := range controlPosts(b, id) {
		if r := b.get(path + "?" + controlPosts(b, id)[path].Encode()); r.status != http.StatusMethodNotAllowed {
			t.Errorf("GET %s = %d, want 405", path, r.status)
		}
	}
	controlsUnchanged(b, id)

	for path, form := range controlPosts(b, id) {
		if r := b.post(path, form); r.status != http.StatusSeeOther {
			t.Errorf("control: POST %s from the console's page = %d, want 303:\n%s", path, r.status, r.body)
		}
	}
	ps := b.pauses()
	if _, ok := ps["welcome_email"]; !ok {
		t.Error("control: the pause did not pause welcome_email")
	}
	if _, ok := ps["paused_type"]; ok {
		t.Error("control: the resume left paused_type paused")
	}
	if s := b.status(id); s != "CANCELLED" && s != "PENDING" {
		t.Errorf("control: the message is %s", s)
	}
}

// TestControlsWithToken: with a token, a control's post without the session is refused 401
// and changes nothing.
func TestControlsWithToken(t *testing.T) {
	t.Parallel()
	const token = "c0ns0le-t0ken-9f8e7d6c5b4a"
	b := setup(t, AllowWrites(), WithToken(token))
	id := b.backedOff("welcome_email")
	if err := outbox.Pause(context.Background(), b.db, "paused_type", outbox.PauseOptions{}); err != nil {
		t.Fatal(err)
	}
	for path, form := range controlPosts(b, id) {
		if r := b.post(path, form); r.status != http.StatusUnauthorized {
			t.Errorf("POST %s without the session = %d, want 401:\n%s", path, r.status, r.body)
		}
	}
	controlsUnchanged(b, id)
	form := controlPosts(b, id)["/pause"]
	if r := b.post("/pause", form, "Authorization", "Bearer "+token); r.status != http.StatusSeeOther {
		t.Errorf("POST /pause with the bearer token = %d, want 303:\n%s", r.status, r.body)
	}
}
