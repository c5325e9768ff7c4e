package cli

import (
	"strings"
	"time"
	"unicode/utf8"

	"github.com/outboxgen/outboxgen/internal/termesc"
	"github.com/outboxgen/outboxgen/runtime/outboxlabel"
)

// How the operator commands print text from outside: masked, cut, and made inert on a terminal
// or in JSON.

// clean removes every form of the DSN's password from text that came from outside.
func (c *opsCmd) clean(s string) string { return scrub(s, c.secrets) }

// line is text from outside made fit for a terminal, as one line or table cell: masked, then
// every control character escaped.
func (c *opsCmd) line(s string) string { return termesc.Line(c.clean(s)) }

// text is text from outside made fit for a terminal, as lines of its own (a stack trace, a
// payload): masked, then every control character but newline and tab escaped.
func (c *opsCmd) text(s string) string { return termesc.Text(c.clean(s)) }

// cell is a long text from outside (a last_error) for one table cell: masked, cut to width
// characters (after masking, so that no part of a password survives the cut, and after
// writing bytes that are not UTF-8 as \xNN, which the cut would turn into U+FFFD), on one line
// and escaped.
func (c *opsCmd) cell(s string, width int) string {
	return termesc.Line(opsOneLine(opsTruncate(outboxlabel.Escape(c.clean(s)), width)))
}

// jsonString is text from the database as a JSON string: masked, and its bytes that are not UTF-8
// written as \xNN (outboxlabel.Escape), which encoding/json would turn into U+FFFD, so that two event
// types that differ only there stay two keys.
func (c *opsCmd) jsonString(s string) string { return outboxlabel.Escape(c.clean(s)) }

// formatTime prints a database time; "-" for one that is not set (a row made FAILED by hand
// without failed_at).
func formatTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// opsTruncate cuts s after n characters, marking the cut with "…".
func opsTruncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}

// opsOneLine joins the words of s with single spaces: line breaks and runs of blanks go.
func opsOneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
