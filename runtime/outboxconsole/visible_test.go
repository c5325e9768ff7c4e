package outboxconsole

import (
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/outboxgen/outboxgen/runtime/outbox"
)

func TestVisible(t *testing.T) {
	for _, c := range []struct{ in, line, block string }{
		{"payment_failed", "payment_failed", "payment_failed"},
		{"caf\u00e9 \u65e5\u672c", "caf\u00e9 \u65e5\u672c", "caf\u00e9 \u65e5\u672c"},
		{"safe_\u202Eliame_emoclew", `safe_\u202Eliame_emoclew`, `safe_\u202Eliame_emoclew`},
		{"a\u200Bb\u200Dc\uFEFFd\u00ADe\u2066f\u2069g\u061Ch\u200Ei", `a\u200Bb\u200Dc\uFEFFd\u00ADe\u2066f\u2069g\u061Ch\u200Ei`, `a\u200Bb\u200Dc\uFEFFd\u00ADe\u2066f\u2069g\u061Ch\u200Ei`},
		{"tag\U000E0041", `tag\U000E0041`, `tag\U000E0041`},
		{"x\xff", `x\xFF`, `x\xFF`},
		{"\xc3(", `\xC3(`, `\xC3(`},
		{"a\rb", `a\rb`, `a\rb`},
		{"line1\r\nline2\n\tat x", `line1\r\nline2\n\tat x`, "line1\r\nline2\n\tat x"},
		{"esc\x1b[31mred\x7f\u0085", `esc\u001B[31mred\u007F\u0085`, `esc\u001B[31mred\u007F\u0085`},
		{"sep\u2028par\u2029", `sep\u2028par\u2029`, `sep\u2028par\u2029`},
		{`spelled \u202E out`, `spelled \u202E out`, `spelled \u202E out`},
		{"emoji \U0001F600\uFE0F", "emoji \U0001F600\uFE0F", "emoji \U0001F600\uFE0F"},
	} {
		if got := visibleLine(c.in); got != c.line {
			t.Errorf("visibleLine(%q) = %q, want %q", c.in, got, c.line)
		}
		if got := visibleBlock(c.in); got != c.block {
			t.Errorf("visibleBlock(%q) = %q, want %q", c.in, got, c.block)
		}
	}
}

// tricky are event types that read as something else, or cannot travel through a form as
// text: a right-to-left override that shows as safe_welcome_email, a byte that is not UTF-8
// (a browser sends back U+FFFD), a CR (a browser sends back CRLF), and a type that WithRedact
// masks. Each has a decoy: the type a console that posts the shown text would match instead.
var tricky = []struct{ name, typ, shown, decoy string }{
	{"bidi override", "safe_\u202Eliame_emoclew", `safe_\u202Eliame_emoclew`, "safe_welcome_email"},
	{"not UTF-8", "x\xff", `x\xFF`, "x\uFFFD"},
	{"CR", "a\rb", `a\rb`, "a\r\nb"},
	{"masked", "tenant_hunter2_sync", "tenant_*****_sync", "tenant_*****_sync"},
}

func maskHunter2(s string) string { return strings.ReplaceAll(s, "hunter2", "*****") }

// TestInvisibleCharactersShownEscaped: the overview, the failed list and the message page
// show bidi controls, zero-width characters, bytes that are not UTF-8 and control characters
// in event types, keys, headers, errors and payloads as visible escapes, never as themselves.
func TestInvisibleCharactersShownEscaped(t *testing.T) {
	t.Parallel()
	b := setup(t, AllowWrites(), WithRedact(maskHunter2))
	id := b.insert("safe_\u202Eliame_emoclew", "FAILED", `{"to":"admin\u202E@evil"}`, 3, secs(-120), nil, nil, nil, nil, secs(-60),
		"boom\u200B at\nline 2\x1b[31m")
	b.db.MustExec(t, "UPDATE outbox_messages SET idempotency_key = ?, ordering_key = ?, headers = ? WHERE id = ?",
		"key\u2066x", "ord\xfe", `{"trace\u200D":"v\u202Ev"}`, int64(id))
	b.failed("x\xff", 30, "bad byte")
	b.failed("a\rb", 30, "cr")

	overview := b.get("/")
	failed := b.get("/failed")
	message := b.get(fmt.Sprintf("/message?id=%d", id))
	b.mustContain(overview, `safe_\u202Eliame_emoclew`, `x\xFF`, `a\rb`)
	b.mustContain(failed, `safe_\u202Eliame_emoclew`, `x\xFF`, `a\rb`, `boom\u200B at line 2\u001B[31m`)
	b.mustContain(message, `safe_\u202Eliame_emoclew`, `key\u2066x`, `ord\xFE`, `trace\u200D`, `v\u202Ev`,
		"boom\\u200B at\nline 2\\u001B[31m", `{&#34;to&#34;:&#34;admin\u202E@evil&#34;}`)
	for name, r := range map[string]response{"overview": overview, "failed": failed, "message": message} {
		for _, raw := range []string{"\u202E", "\u200B", "\u200D", "\u2066", "\x1b", "\r", "\xff", "\xfe", "\uFFFD"} {
			if strings.Contains(r.body, raw) {
				t.Errorf("the %s page contains %q as itself:\n%s", name, raw, r.body)
			}
		}
	}
}

// TestRetryByTypeExact: the overview's "Retry 2 failed" of each tricky type, confirmed as a
// browser would (posting the forms' fields as they are on the page), retries exactly that
// type's two rows: not its decoy's, not another type's.
func TestRetryByTypeExact(t *testing.T) {
	t.Parallel()
	for _, tc := range tricky {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, AllowWrites(), WithRedact(maskHunter2))
			mine := []outbox.MessageID{b.failed(tc.typ, 60, "boom"), b.failed(tc.typ, 50, "boom")}
			others := []outbox.MessageID{b.failed(tc.decoy, 40, "boom"), b.failed("other_type", 40, "boom")}

			// The row of the type: the one that shows it and offers to retry 2 (a masked type's
			// decoy shows alike, with 1).
			page := b.get("/")
			rowRE := regexp.MustCompile(`(?s)<tr data-type="` + regexp.QuoteMeta(html.EscapeString(tc.shown)) + `">.*?</tr>`)
			var form url.Values
			for _, row := range rowRE.FindAllString(page.body, -1) {
				if strings.Contains(row, "Retry 2 failed") {
					form = fields(row)
				}
			}
			if form == nil {
				t.Fatalf("no overview row shows %q with Retry 2 failed:\n%s", tc.shown, page.body)
			}
			confirm := b.post("/retry", form)
			if confirm.status != http.StatusOK || !strings.Contains(confirm.body, "Dry run: 2 FAILED message(s) of this type would move.") {
				t.Fatalf("the retry's dry run = %d, want 2 messages of %q:\n%s", confirm.status, tc.shown, confirm.body)
			}
			b.mustContain(confirm, "Retry every FAILED message of "+html.EscapeString(tc.shown)+"?")
			if done := b.post("/retry", fields(confirm.body)); done.status != http.StatusSeeOther {
				t.Fatalf("the confirmed retry = %d, want 303:\n%s", done.status, done.body)
			}
			for _, id := range mine {
				if s := b.status(id); s != "PENDING" {
					t.Errorf("message %d of %q is %s after retrying its type, want PENDING", id, tc.shown, s)
				}
			}
			for _, id := range others {
				if s := b.status(id); s != "FAILED" {
					t.Errorf("message %d of another type is %s after retrying %q, want FAILED", id, s, tc.shown)
				}
			}
		})
	}
}

var hiddenRE = regexp.MustCompile(`<input type="hidden" name="([^"]*)" value="([^"]*)">`)

// fields are the hidden fields in some HTML, as a browser posts them.
func fields(body string) url.Values {
	v := url.Values{}
	for _, m := range hiddenRE.FindAllStringSubmatch(body, -1) {
		v.Add(html.UnescapeString(m[1]), html.UnescapeString(m[2]))
	}
	return v
}
