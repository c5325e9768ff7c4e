package outboxconsole

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// maxPayloadShown is how much of a payload the message page shows: Enqueue accepts up to
// outbox.MaxPayloadBytes, more than a page should carry.
const maxPayloadShown = 64 << 10

// payloadText is a payload as the message page shows it: as stored, never re-indented (the
// indentation of a deeply nested payload grows with the square of its depth), masked,
// escaped, and cut after maxPayloadShown bytes, with a note saying so.
func (c *Console) payloadText(p json.RawMessage) (text, note string) {
	s := c.cfg.redact(string(p))
	valid := json.Valid(p)
	if len(s) > maxPayloadShown {
		cut := maxPayloadShown
		// Cut at a character's start, so the last character shown is whole (a byte that is not
		// UTF-8 is a character of its own here).
		for back := 0; back < utf8.UTFMax && cut > 0 && !utf8.RuneStart(s[cut]); back++ {
			cut--
		}
		note = fmt.Sprintf("Truncated: the first %d of %d bytes, as stored.", cut, len(s))
		s = s[:cut]
	}
	if !valid {
		note = strings.TrimSpace(note + " Not valid JSON; shown as stored.")
	}
	return visibleBlock(s), note
}
