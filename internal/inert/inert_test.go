package inert

import (
	"fmt"
	"strings"
	"testing"
)

func TestRewrite(t *testing.T) {
	keep := func(r rune, rest string) bool {
		return !Control(r) && !Bidi(r) || r == '\n' || r == '\r' && strings.HasPrefix(rest, "\n")
	}
	esc := func(b *strings.Builder, r rune) { fmt.Fprintf(b, "<%X>", r) }
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{`plain \ text`, `plain \ text`},
		{"é😀", "é😀"},
		{"a\x1bb", "a<1B>b"},
		{"a\x7f\u009b", "a<7F><9B>"},
		{"\u202Eabc\u2066", "<202E>abc<2066>"},
		{"line\r\nend\r", "line\r\nend<D>"},
		{"bad\xff\xc3(", `bad\xFF\xC3(`},
	} {
		if got := Rewrite(c.in, keep, esc); got != c.want {
			t.Errorf("Rewrite(%q) = %q, want %q", c.in, got, c.want)
		}
		if clean := c.in == c.want; clean != (First(c.in, keep) == len(c.in)) {
			t.Errorf("First(%q) = %d, len %d", c.in, First(c.in, keep), len(c.in))
		}
	}
}

func TestRewriteCleanDoesNotAllocate(t *testing.T) {
	keep := func(r rune, _ string) bool { return !Control(r) }
	s := "orders.created é 😀"
	if n := testing.AllocsPerRun(100, func() { _ = Rewrite(s, keep, nil) }); n != 0 {
		t.Errorf("Rewrite of a clean text allocates %v times", n)
	}
}
