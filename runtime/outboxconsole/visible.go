package outboxconsole

import (
	"fmt"
	"strings"
	"unicode"

	"github.com/outboxgen/outboxgen/internal/inert"
)

// Text from the database reaches a page through html/template, which makes markup inert. It
// leaves the characters that change how the rest of a line reads:
//   - a right-to-left override shows "safe_\u202Eliame_emoclew" as "safe_welcome_email";
//   - a zero-width space makes two types look alike;
//   - a byte that is not UTF-8 becomes U+FFFD in the browser.
//
// visibleLine and visibleBlock write those as escapes a reader sees. A character becomes
// \uXXXX, or \UXXXXXXXX above the BMP: the spelling a JSON string also accepts. A byte that is
// not UTF-8 becomes \xNN.
//
// Which characters: every control (category Cc), every format character (Cf: the bidi
// embeddings, overrides and isolates, the left-to-right and right-to-left marks, the
// zero-width space, joiner and non-joiner, the word joiner, the soft hyphen, the byte order
// mark, the tag characters), and the line and paragraph separators (Zl, Zp). A backslash is
// left as it is, as outboxlabel.Escape leaves it: a text that spells an escape out reads like
// the character it names, and the console's forms never send a text back as shown (they post
// an exact reference, see typeref.go).
//
// The walk over the text and the \xNN are internal/inert's, shared with internal/termesc. The
// policy, which characters to escape and how, is this file's.

// visibleLine escapes a one-line text (an event type, a key, a header): line breaks and tabs
// too, as \n, \r and \t.
func visibleLine(s string) string { return visible(s, false) }

// visibleBlock escapes a text shown in a <pre> (a payload, a last_error): line breaks and tabs
// stay as they are, so a stack trace keeps its lines; a CR stays only before a LF.
func visibleBlock(s string) string { return visible(s, true) }

// visible escapes s for one line, or for a block of lines when block is set.
func visible(s string, block bool) string {
	if block {
		return inert.Rewrite(s, keepInBlock, escapeInvisible)
	}
	return inert.Rewrite(s, keepInLine, escapeInvisible)
}

// keepInLine is the policy of visibleLine: every invisible character is escaped.
func keepInLine(r rune, _ string) bool { return !invisible(r) }

// keepInBlock is the policy of visibleBlock: line breaks and tabs are kept too.
func keepInBlock(r rune, rest string) bool { return !invisible(r) || keptInBlock(r, rest) }

// escapeInvisible writes r as \n, \r, \t, \uXXXX, or \UXXXXXXXX above the BMP.
func escapeInvisible(b *strings.Builder, r rune) {
	switch {
	case r == '\n':
		b.WriteString(`\n`)
	case r == '\r':
		b.WriteString(`\r`)
	case r == '\t':
		b.WriteString(`\t`)
	case r > 0xFFFF:
		fmt.Fprintf(b, `\U%08X`, r)
	default:
		fmt.Fprintf(b, `\u%04X`, r)
	}
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
