package outboxconsole

import (
	"fmt"
	"html"
	"strings"
	"testing"
)

// TestPayloadShownAsStored: a 20 KB payload nested 10,000 levels deep, which Enqueue accepts,
// is shown as stored on a small page (indenting it would take about 100 MB); a 100 KB payload
// is cut after 64 KiB, at a character's start, with a note saying so.
func TestPayloadShownAsStored(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const depth = 10000
	nested := strings.Repeat("[", depth) + strings.Repeat("]", depth)
	deep := b.enqueue("deep_payload", nested)
	r := b.get(fmt.Sprintf("/message?id=%d", deep))
	if r.status != 200 || len(r.body) > 150<<10 {
		t.Fatalf("the message page of a %d-level payload = %d, %d bytes; want 200 and under 150 KiB", depth, r.status, len(r.body))
	}
	if !strings.Contains(r.body, `<pre class="payload" id="payload">`+nested+`</pre>`) {
		t.Errorf("the page does not show the %d-level payload as stored", depth)
	}
	if strings.Contains(r.body, "Truncated") || strings.Contains(r.body, "Not valid JSON") {
		t.Errorf("the whole, valid payload has a note")
	}

	// `{"ab":"` is 7 bytes, then 2-byte characters: byte 65536 is the second byte of one.
	big := `{"ab":"` + strings.Repeat("\u00e9", 50_000) + `"}`
	long := b.enqueue("big_payload", big)
	r = b.get(fmt.Sprintf("/message?id=%d", long))
	if note := fmt.Sprintf("Truncated: the first 65535 of %d bytes, as stored.", len(big)); !strings.Contains(r.body, note) {
		t.Errorf("the page of a %d-byte payload lacks the note %q", len(big), note)
	}
	if !strings.Contains(r.body, `<pre class="payload" id="payload">`+html.EscapeString(big[:65535])+`</pre>`) {
		t.Errorf("the page does not show the payload's first 65535 bytes, as stored")
	}
	if len(r.body) > 150<<10 {
		t.Errorf("the page of a truncated payload is %d bytes, want under 150 KiB", len(r.body))
	}
}
