// Package inert is the core that internal/termesc (text for a terminal) and the console's
// pages (text for a browser) share to show text read from a database as characters a reader
// sees. It walks the text, keeps printable ASCII, writes each byte that is not UTF-8 as \xNN,
// and leaves every other character to the caller's policy: keep it, or write an escape for it.
package inert

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Keep is a policy: it says whether a text keeps the character r as it is. rest is the text
// after r, for a policy that keeps a character only before another (a CR before a LF). Keep is
// never asked about printable ASCII (U+0020 to U+007E), which every text keeps.
type Keep func(r rune, rest string) bool

// Escape writes the escape of a character that keep refused to b.
type Escape func(b *strings.Builder, r rune)

// Rewrite returns s with every character keep refuses written by esc, and every byte that is
// not UTF-8 written as \xNN (two upper-case hex digits). A text that needs no rewriting is
// returned as it is, without allocating.
func Rewrite(s string, keep Keep, esc Escape) string {
	i := First(s, keep)
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for i < len(s) {
		c := s[i]
		if printable(c) {
			b.WriteByte(c)
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02X`, c)
		case keep(r, s[i+size:]):
			b.WriteString(s[i : i+size])
		default:
			esc(&b, r)
		}
		i += size
	}
	return b.String()
}

// First is the index of the first byte of s that Rewrite would rewrite, or len(s).
func First(s string, keep Keep) int {
	for i := 0; i < len(s); {
		if printable(s[i]) {
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || !keep(r, s[i+size:]) {
			return i
		}
		i += size
	}
	return len(s)
}

// printable says c is printable ASCII: the common case, kept without decoding.
func printable(c byte) bool { return c >= 0x20 && c < 0x7F }

// Control says r is a control character (category Cc): C0 (U+0000 to U+001F), DEL (U+007F)
// or C1 (U+0080 to U+009F). U+009B is a CSI, the start of an escape sequence, for a terminal
// that reads C1 controls in UTF-8.
func Control(r rune) bool { return r < 0x20 || r >= 0x7F && r <= 0x9F }

// Bidi says r is a bidirectional formatting character: the Arabic letter mark, the
// left-to-right and right-to-left marks, the embeddings, overrides and isolates. Each reorders
// the rest of a line where bidi is implemented: an event type could make "check: ok" out of
// "check: FAILING".
func Bidi(r rune) bool {
	switch {
	case r == 0x061C, r == 0x200E, r == 0x200F:
		return true
	case r >= 0x202A && r <= 0x202E, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}
