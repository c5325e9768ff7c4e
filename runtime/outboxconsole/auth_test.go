package outboxconsole

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
)

const testToken = "s3cret-token-for-tests"

// TestTokenRequired: with a token, pages answer the login form with 401 and writes are refused
// even with the CSRF token; a wrong login is refused; the right one sets a cookie that opens
// the pages (without the token in it); a bearer header works for scripts.
func TestTokenRequired(t *testing.T) {
	t.Parallel()
	b := setup(t, AllowWrites(), WithToken(testToken))
	id := b.failed("payment_failed", 60, "boom")

	r := b.get("/")
	if r.status != http.StatusUnauthorized || !strings.Contains(r.body, `name="token"`) {
		t.Fatalf("GET / without the token = %d, want 401 with the login form:\n%s", r.status, r.body)
	}
	if strings.Contains(r.body, "payment_failed") || strings.Contains(r.body, b.c.csrf) {
		t.Errorf("the login page shows outbox data or the CSRF token:\n%s", r.body)
	}
	form := csrfField(b.c)
	form.Set("id", strconv.FormatInt(int64(id), 10))
	form.Set("confirm", "1")
	if w := b.post("/retry", form); w.status != http.StatusUnauthorized {
		t.Errorf("a write without the token = %d, want 401", w.status)
	}
	if w := b.post("/retry", form, "Authorization", "Bearer wrong-token-wrong-token"); w.status != http.StatusUnauthorized {
		t.Errorf("a write with a wrong bearer token = %d, want 401", w.status)
	}
	if s := b.status(id); s != "FAILED" {
		t.Fatalf("message is %s after unauthenticated writes, want FAILED", s)
	}
	if css := b.get("/static/style.css"); css.status != 200 {
		t.Errorf("the login page's stylesheet = %d without the token, want 200", css.status)
	}

	bad := b.post("/login", url.Values{"token": {"nope"}, "next": {"./failed"}})
	if bad.status != http.StatusUnauthorized || bad.header.Get("Set-Cookie") != "" {
		t.Errorf("a wrong login = %d with cookie %q, want 401 and none", bad.status, bad.header.Get("Set-Cookie"))
	}
	good := b.post("/login", url.Values{"token": {testToken}, "next": {"./failed?type=x"}})
	cookie := good.header.Get("Set-Cookie")
	if good.status != http.StatusSeeOther || good.location != "./failed?type=x" || !strings.HasPrefix(cookie, cookieName+"=") {
		t.Fatalf("login = %d to %q with cookie %q, want 303 to ./failed?type=x and the session cookie", good.status, good.location, cookie)
	}
	if strings.Contains(cookie, testToken) || !strings.Contains(cookie, "HttpOnly") || !strings.Contains(cookie, "SameSite=Strict") {
		t.Errorf("session cookie %q: want HttpOnly, SameSite=Strict, and not the token itself", cookie)
	}
	value := strings.SplitN(strings.SplitN(cookie, ";", 2)[0], "=", 2)[1]
	if r := b.get("/", "Cookie", cookieName+"="+value); r.status != 200 || !strings.Contains(r.body, "payment_failed") {
		t.Errorf("GET / with the session cookie = %d, want the overview", r.status)
	}
	if r := b.get("/", "Cookie", cookieName+"="+strings.Repeat("0", len(value))); r.status != http.StatusUnauthorized {
		t.Errorf("GET / with a forged cookie = %d, want 401", r.status)
	}
	if r := b.get("/", "Authorization", "Bearer "+testToken); r.status != 200 {
		t.Errorf("GET / with the bearer token = %d, want 200", r.status)
	}
	// With the token and the CSRF token, the write goes through: the refusals above were the token's.
	if w := b.post("/retry", form, "Cookie", cookieName+"="+value); w.status != http.StatusSeeOther {
		t.Errorf("a write with the session cookie and the CSRF token = %d, want 303:\n%s", w.status, w.body)
	}
	if s := b.status(id); s != "PENDING" {
		t.Errorf("message is %s after the authenticated retry, want PENDING", s)
	}
}

// TestLoginNextStaysOnTheConsole: the login's destination is kept relative to the console.
func TestLoginNextStaysOnTheConsole(t *testing.T) {
	for in, want := range map[string]string{
		"./failed?type=a":      "./failed?type=a",
		"https://evil.example": "./",
		"//evil.example/":      "./",
		".//evil.example/":     "./",
		"./\\evil":             "./",
		"":                     "./",
	} {
		if got := safeNext(in); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", in, got, want)
		}
	}
}
