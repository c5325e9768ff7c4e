package outboxconsole

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Text from the database reaches a page through html/template, which makes markup inert but
// leaves characters that change how the rest of a line reads: a right-to-left override shows
// "safe_\u202Eliame_emoclew" as "safe_welcome_email", a zero-width space makes two types look
// alike, a byte that is not UTF-8 becomes U+FFFD in the browser. visibleLine and visibleBlock
// write those as escapes a reader sees: a character as \uXXXX (\UXXXXXXXX above the BMP, the
// spelling a JSON string also accepts), a byte that is not UTF-8 as \xNN.
//
// Which characters: every control (category Cc), every format character (Cf: the bidi
// embeddings, overrides and isolates, the left-to-right and right-to-left marks, the
// zero-width space, joiner and non-joiner, the word joiner, the soft hyphen, the byte order
// mark, the tag characters), and the line and paragraph separators (Zl, Zp). A backslash is
// left as it is, as internal/utf8esc leaves it: a text that spells an escape out reads like
// the character it names, and the console's forms never send a text back as shown (they post
// an exact reference, see typeref.go).

// visibleLine escapes a one-line text (an event type, a key, a header): line breaks and tabs
// too, as \n, \r and \t.
func visibleLine(s string) string { return visible(s, false) }

// visibleBlock escapes a text shown in a <pre> (a payload, a last_error): line breaks and tabs
// stay as they are, so a stack trace keeps its lines; a CR stays only before a LF.
func visibleBlock(s string) string { return visible(s, true) }

func visible(s string, block bool) string {
	i := firstInvisible(s, block)
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02X`, s[i])
		case !invisible(r) || block && keptInBlock(r, s[i+size:]):
			b.WriteString(s[i : i+size])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r > 0xFFFF:
			fmt.Fprintf(&b, `\U%08X`, r)
		default:
			fmt.Fprintf(&b, `\u%04X`, r)
		}
		i += size
	}
	return b.String()
}

// firstInvisible is the index of the first byte visible must rewrite, or len(s).
func firstInvisible(s string, block bool) int {
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < 0x7F { // printable ASCII: the common case, no decoding
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || invisible(r) && !(block && keptInBlock(r, s[i+size:])) {
			return i
		}
		i += size
	}
	return len(s)
}

// invisible says whether r changes or hides how text reads rather than showing as a glyph.
func invisible(r rune) bool {
	return unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp)
}

// keptInBlock says whether a block of text keeps r as it is: a line break, a tab, or a CR
// that ends a line (CRLF).
func keptInBlock(r rune, rest string) bool {
	return r == '\n' || r == '\t' || r == '\r' && strings.HasPrefix(rest, "\n")
}
