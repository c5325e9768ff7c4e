// Package termesc makes text read from a database inert on a terminal, the way html/template
// makes it inert in a page. An event type, a handler's error or a payload is written by whoever
// could write a row: printed raw, an ESC sequence in it can erase the lines before it, hide the
// lines after it or retitle the window, and a byte 0xFF is text/tabwriter's escape character.
//
// Control characters are written as strconv.Quote writes them (\n, \x1b, \u009b), bytes that are
// not UTF-8 as \xNN. Everything else, backslashes included, is left as it is: the output is for
// people, and a payload's `\"` should read as stored. The walk over the text is internal/inert's,
// shared with the console's pages.
package termesc

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/outboxgen/outboxgen/internal/inert"
)

// Line returns s escaped for one line of output, a table cell among others: every control
// character is escaped, newlines and tabs included.
func Line(s string) string { return escape(s, false) }

// Text returns s escaped for output of its own lines (a stack trace, a payload): newlines and
// tabs are kept, every other control character is escaped. A carriage return is escaped too:
// it would let the text that follows overwrite what came before on the same line.
func Text(s string) string { return escape(s, true) }

// escape escapes s for Text when keepLines is set, for Line otherwise.
func escape(s string, keepLines bool) string {
	if keepLines {
		return inert.Rewrite(s, keepText, escapeRune)
	}
	return inert.Rewrite(s, keepLine, escapeRune)
}

// keepLine is the policy of Line: every character a terminal acts on is escaped.
func keepLine(r rune, _ string) bool { return !unsafeRune(r) }

// keepText is the policy of Text: newlines and tabs are kept too.
func keepText(r rune, _ string) bool { return r == '\n' || r == '\t' || !unsafeRune(r) }

// escapeRune writes r as strconv.Quote would: a named escape, \xNN below U+0080, \uNNNN above.
func escapeRune(b *strings.Builder, r rune) {
	switch {
	case r < 0x20 && named[r] != "":
		b.WriteString(named[r])
	case r < 0x80:
		fmt.Fprintf(b, `\x%02x`, r)
	default:
		fmt.Fprintf(b, `\u%04x`, r)
	}
}

// named holds the C0 controls strconv.Quote writes by name.
var named = [0x20]string{'\a': `\a`, '\b': `\b`, '\f': `\f`, '\n': `\n`, '\r': `\r`, '\t': `\t`, '\v': `\v`}

// unsafeRune says r is a character a terminal acts on instead of showing: a control character
// (C0, DEL, C1), or a bidirectional formatting character, which reorders the rest of the line
// on a terminal that implements bidi.
func unsafeRune(r rune) bool { return inert.Control(r) || inert.Bidi(r) }

// JSON returns encoding/json output with what that encoder leaves raw and a terminal acts on
// escaped inside its strings: DEL and the C1 controls as \u00XX, and bytes that are not UTF-8
// (which reach the output only through a json.RawMessage) as \ufffd, as the encoder writes them
// in the strings it encodes itself. Outside strings, JSON holds only ASCII punctuation, digits,
// letters and spaces, so the document means what it meant.
func JSON(b []byte) []byte {
	if inert.First(string(b), keepText) == len(b) {
		return b
	}
	out := make([]byte, 0, len(b)+16)
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			out = append(out, `\ufffd`...)
		case r >= 0x7F && unsafeRune(r):
			out = fmt.Appendf(out, `\u%04x`, r)
		default:
			out = append(out, b[i:i+size]...)
		}
		i += size
	}
	return out
}
