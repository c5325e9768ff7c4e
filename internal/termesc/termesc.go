// Package termesc makes text read from a database inert on a terminal, the way html/template
// makes it inert in a page. An event type, a handler's error or a payload is written by whoever
// could write a row: printed raw, an ESC sequence in it can erase the lines before it, hide the
// lines after it or retitle the window, and a byte 0xFF is text/tabwriter's escape character.
//
// Control characters are written as strconv.Quote writes them (\n, \x1b, \u009b), bytes that are
// not UTF-8 as \xNN. Everything else, backslashes included, is left as it is: the output is for
// people, and a payload's `\"` should read as stored.
package termesc

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Line returns s escaped for one line of output, a table cell among others: every control
// character is escaped, newlines and tabs included.
func Line(s string) string { return escape(s, false) }

// Text returns s escaped for output of its own lines (a stack trace, a payload): newlines and
// tabs are kept, every other control character is escaped. A carriage return is escaped too:
// it would let the text that follows overwrite what came before on the same line.
func Text(s string) string { return escape(s, true) }

func escape(s string, keepLines bool) string {
	if clean(s, keepLines) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02X`, s[i])
		case keepLines && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case r == '\a':
			b.WriteString(`\a`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\v':
			b.WriteString(`\v`)
		case r < 0x20 || r == 0x7F:
			fmt.Fprintf(&b, `\x%02x`, r)
		case unsafeRune(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// clean says s needs no escaping, without allocating: the common case.
func clean(s string, keepLines bool) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 && !(keepLines && (c == '\n' || c == '\t')) || c == 0x7F {
				return false
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || unsafeRune(r) {
			return false
		}
		i += size
	}
	return true
}

// unsafeRune says r is a character above ASCII that a terminal acts on instead of showing: a C1
// control (U+0080 to U+009F; U+009B is a CSI, the start of an escape sequence, for terminals
// that read C1 controls in UTF-8), or a bidirectional formatting character, which reorders the
// rest of the line on a terminal that implements bidi (an event type could make "check: ok"
// out of "check: FAILING").
func unsafeRune(r rune) bool {
	switch {
	case r >= 0x80 && r <= 0x9F:
		return true
	case r == 0x061C, r == 0x200E, r == 0x200F:
		return true
	case r >= 0x202A && r <= 0x202E, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}

// JSON returns encoding/json output with what that encoder leaves raw and a terminal acts on
// escaped inside its strings: DEL and the C1 controls as \u00XX, and bytes that are not UTF-8
// (which reach the output only through a json.RawMessage) as \ufffd, as the encoder writes them
// in the strings it encodes itself. Outside strings, JSON holds only ASCII punctuation, digits,
// letters and spaces, so the document means what it meant.
func JSON(b []byte) []byte {
	if clean(string(b), true) {
		return b
	}
	out := make([]byte, 0, len(b)+16)
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			out = append(out, `\ufffd`...)
		case r == 0x7F || unsafeRune(r):
			out = fmt.Appendf(out, `\u%04x`, r)
		default:
			out = append(out, b[i:i+size]...)
		}
		i += size
	}
	return out
}
