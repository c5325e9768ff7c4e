package outboxconsole

import (
	"fmt"
	"strings"
	"testing"
)

// TestDatabaseTextStaysInert: a payload that closes a script element and opens another, a
// last_error full of HTML, and an event type with markup are shown as text on every page that
// shows them: escaped, never as markup.
func TestDatabaseTextStaysInert(t *testing.T) {
	t.Parallel()
	b := setup(t, AllowWrites())
	const payload = `{"note":"</script><script>alert(1)</script>","html":"<img src=x onerror=alert(2)>"}`
	const lastError = `handler: <script>alert(3)</script> <b onmouseover="alert(4)">bold</b> & "quotes" 'too'`
	const evilType = `<script>alert(5)</script>`
	id := b.insert("payment_failed", "FAILED", payload, 3, secs(-120), nil, nil, nil, nil, secs(-60), lastError)
	b.insert(evilType, "FAILED", `{}`, 1, secs(-120), nil, nil, nil, nil, secs(-30), lastError)
	b.c.samp.sampleOnce(t.Context())

	pages := map[string][]string{
		fmt.Sprintf("/message?id=%d", id): {
			`&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;`,
			`&lt;img src=x onerror=alert(2)&gt;`,
			`handler: &lt;script&gt;alert(3)&lt;/script&gt; &lt;b onmouseover=&#34;alert(4)&#34;&gt;bold&lt;/b&gt; &amp; &#34;quotes&#34; &#39;too&#39;`,
		},
		"/failed": {
			`handler: &lt;script&gt;alert(3)&lt;/script&gt;`,
			`&lt;script&gt;alert(5)&lt;/script&gt;`,
		},
		"/": {`&lt;script&gt;alert(5)&lt;/script&gt;`},
		"/failed?type=" + strings.ReplaceAll(evilType, "<", "%3C"): {`&lt;script&gt;alert(5)&lt;/script&gt;`},
	}
	for path, wants := range pages {
		r := b.get(path)
		if r.status != 200 {
			t.Errorf("GET %s = %d", path, r.status)
			continue
		}
		for _, w := range wants {
			if !strings.Contains(r.body, w) {
				t.Errorf("GET %s lacks the escaped text %q:\n%s", path, w, r.body)
			}
		}
		for _, raw := range []string{"<script>alert", "<img src=x", "<b onmouseover", "</script><script>"} {
			if strings.Contains(r.body, raw) {
				t.Errorf("GET %s contains raw markup %q from the database:\n%s", path, raw, r.body)
			}
		}
	}
	// The confirmation page echoes the type it would retry.
	form := csrfField(b.c)
	form.Set("type", evilType)
	r := b.post("/retry", form)
	if strings.Contains(r.body, "<script>alert") || !strings.Contains(r.body, "Retry every FAILED message of &lt;script&gt;alert(5)&lt;/script&gt;?") {
		t.Errorf("the confirmation page does not escape the event type:\n%s", r.body)
	}
	if csp := r.header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
		t.Errorf("Content-Security-Policy = %q, want script-src 'self' (no inline script runs even if one slipped through)", csp)
	}
	// Not no-referrer: Chromium then posts the console's own forms with "Origin: null", which
	// the origin check refuses (found by the e2e test).
	if rp := r.header.Get("Referrer-Policy"); rp != "same-origin" {
		t.Errorf("Referrer-Policy = %q, want same-origin", rp)
	}
}

// TestRedactMasksSecrets: WithRedact reaches every text from the database and the errors.
func TestRedactMasksSecrets(t *testing.T) {
	t.Parallel()
	const secret = "hunter2-database-password"
	b := setup(t, WithRedact(func(s string) string { return strings.ReplaceAll(s, secret, "*****") }))
	id := b.insert("a", "FAILED", `{"dsn":"app:`+secret+`@tcp(db)/x"}`, 1, secs(-60), nil, nil, nil, nil, secs(-30),
		"connect app:"+secret+"@tcp(db): refused")
	for _, path := range []string{"/", "/failed", fmt.Sprintf("/message?id=%d", id)} {
		r := b.get(path)
		if strings.Contains(r.body, secret) {
			t.Errorf("GET %s shows the secret:\n%s", path, r.body)
		}
	}
	b.mustContain(b.get(fmt.Sprintf("/message?id=%d", id)), "connect app:*****@tcp(db): refused")
}
