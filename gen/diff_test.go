package gen

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// Within a hunk, the lines a change removes come before the lines it adds, as diff -u writes
// them; interleaved, a replaced block is hard to read.
func TestUnifiedDiffRemovesBeforeAdds(t *testing.T) {
	for _, tc := range []struct{ old, new, want string }{
		{"a\nb\nc\nd\n", "a\nB\nc\nD\n", "@@ -1,4 +1,4 @@\n a\n-b\n+B\n c\n-d\n+D\n"},
		{"x\n1\n2\ny\n", "x\n3\n4\n5\ny\n", "@@ -1,4 +1,5 @@\n x\n-1\n-2\n+3\n+4\n+5\n y\n"},
		{"old\n", "new\n", "@@ -1,1 +1,1 @@\n-old\n+new\n"},
		{"", "a\nb\n", "@@ -0,0 +1,2 @@\n+a\n+b\n"},
		{"a\nb\n", "", "@@ -1,2 +0,0 @@\n-a\n-b\n"},
	} {
		got := unifiedDiff("f.go", tc.old, tc.new)
		want := "--- f.go (on disk)\n+++ f.go (generated)\n" + tc.want
		if got != want {
			t.Errorf("unifiedDiff(%q, %q):\n%s\nwant:\n%s", tc.old, tc.new, got, want)
		}
	}
}

// Every diff applies: its hunks, read as patch reads them, turn the old text into the new,
// and no hunk has a '+' line before a '-' line of the same change.
func TestUnifiedDiffApplies(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 13))
	lines := func() string {
		var b strings.Builder
		for n := r.IntN(30); n > 0; n-- {
			b.WriteString(strconv.Itoa(r.IntN(6)) + "\n")
		}
		return b.String()
	}
	for i := 0; i < 2000; i++ {
		old, new := lines(), lines()
		d := unifiedDiff("f", old, new)
		if old == new {
			if d != "" {
				t.Fatalf("equal texts gave a diff:\n%s", d)
			}
			continue
		}
		got, err := applyDiff(old, d)
		if err != nil || got != new {
			t.Fatalf("the diff of %q -> %q does not apply (%v, got %q):\n%s", old, new, err, got, d)
		}
		prev := byte(' ')
		for _, l := range strings.Split(d, "\n")[2:] {
			if l != "" && l[0] == '-' && prev == '+' {
				t.Fatalf("a '-' line after a '+' line in one change:\n%s", d)
			}
			if l != "" {
				prev = l[0]
			}
		}
	}
}

// applyDiff applies a unified diff to old, checking each hunk's header and context.
func applyDiff(old, diff string) (string, error) {
	a := splitLines(old)
	var out []string
	next := 0 // the next line of a not yet copied
	lines := strings.Split(strings.TrimSuffix(diff, "\n"), "\n")[2:]
	for k := 0; k < len(lines); {
		var aStart, aLen, bStart, bLen int
		if _, err := fmt.Sscanf(lines[k], "@@ -%d,%d +%d,%d @@", &aStart, &aLen, &bStart, &bLen); err != nil {
			return "", fmt.Errorf("line %q: %v", lines[k], err)
		}
		k++
		from := aStart - 1
		if aLen == 0 {
			from = aStart
		}
		if from < next {
			return "", fmt.Errorf("hunk at %d overlaps", aStart)
		}
		out = append(out, a[next:from]...)
		if bStart-1 != len(out) && !(bLen == 0 && bStart == len(out)) {
			return "", fmt.Errorf("hunk +%d starts at new line %d", bStart, len(out)+1)
		}
		next = from
		var seenA, seenB int
		for ; k < len(lines) && !strings.HasPrefix(lines[k], "@@"); k++ {
			l := lines[k]
			switch l[0] {
			case ' ', '-':
				if next >= len(a) || a[next] != l[1:] {
					return "", fmt.Errorf("context %q does not match", l)
				}
				next++
				seenA++
				if l[0] == ' ' {
					out = append(out, l[1:])
					seenB++
				}
			case '+':
				out = append(out, l[1:])
				seenB++
			}
		}
		if seenA != aLen || seenB != bLen {
			return "", fmt.Errorf("hunk -%d,%d +%d,%d has %d and %d lines", aStart, aLen, bStart, bLen, seenA, seenB)
		}
	}
	out = append(out, a[next:]...)
	if len(out) == 0 {
		return "", nil
	}
	return strings.Join(out, "\n") + "\n", nil
}
