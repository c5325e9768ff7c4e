package gen

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// This file places a YAML syntax error. yaml.v3 names the line where the enclosing block
// starts (often far above the mistake, and off by one), never a column. The mistake is on the
// last line of the shortest prefix of the file that fails with the same error: found by binary
// search, a few parses even for a big file. The column and a hint come from reading that line.

// syntaxError returns where and what the syntax error err of src is.
func syntaxError(src []byte, err error) (pos, string) {
	src = bytes.TrimPrefix(src, utf8BOM) // yaml.v3 skips it; it is not in line 1's columns
	msg := yamlErrMsg(err)
	errLine := yamlErrPos(err).line
	var lines []string // each without its line break
	var ends []int     // ends[i]: the offset just past line i+1
	for off := 0; off < len(src); {
		n := bytes.IndexByte(src[off:], '\n')
		if n < 0 {
			n = len(src) - off - 1
		}
		lines = append(lines, strings.TrimSuffix(string(src[off:off+n+1]), "\n"))
		off += n + 1
		ends = append(ends, off)
	}
	// The same error has the same message and line, except at the end of the input (as for an
	// unclosed quote), where yaml.v3 names the last line of whatever prefix it read.
	same := func(k int) bool {
		prefix := src[:ends[k-1]]
		e := parseYAML(prefix)
		if e == nil || yamlErrMsg(e) != msg {
			return false
		}
		line := yamlErrPos(e).line
		return line == errLine || line >= lineCount(prefix) && errLine >= lineCount(src)
	}
	if len(lines) == 0 || !same(len(lines)) {
		// Not reproducible from the bytes (it never happens): keep yaml.v3's line.
		p := yamlErrPos(err)
		p.line = min(p.line, max(len(lines), 1))
		return p, msg
	}
	// Prefixes that end before the mistake parse, or fail differently (cut inside a flow
	// collection or a quoted string); from the mistake on they fail the same way.
	lo, hi := 1, len(lines)
	for lo < hi {
		if mid := (lo + hi) / 2; same(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return explainSyntax(lines, lo, msg)
}

// parseYAML parses every document of src, as load does, and returns the first error.
func parseYAML(src []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(src))
	for {
		var n yaml.Node
		if err := dec.Decode(&n); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// unquotedTypeRe finds a list or map type written without quotes: [ starts a YAML list, and
// inside {...} the brackets of map[string]T end the value.
var unquotedTypeRe = regexp.MustCompile(`(?:^|[\s:{,])((?:\[\])+[A-Za-z_][\w\[\]]*|(?:\[\])*map\[\w*\][\w\[\]]*)`)

// explainSyntax points at the mistake on line k (1-based) of lines, or on the line before
// when that one is the culprit, with a hint when the fix is known.
func explainSyntax(lines []string, k int, msg string) (pos, string) {
	line := strings.TrimSuffix(lines[k-1], "\r")
	at := func(i int) pos { return pos{k, utf8.RuneCountInString(line[:i]) + 1} }
	indent := indentOf(line)
	prev := 0 // the line above that holds something
	for i := k - 1; i >= 1; i-- {
		if t := strings.TrimSpace(lines[i-1]); t != "" && t[0] != '#' {
			prev = i
			break
		}
	}
	prevLine := ""
	if prev > 0 {
		prevLine = strings.TrimSuffix(lines[prev-1], "\r")
	}
	if i := strings.IndexByte(line, '\t'); i >= 0 &&
		(strings.Contains(msg, "tab") || strings.Contains(msg, "cannot start any token") && strings.Trim(line[:i], " -") == "") {
		return at(i), msg + " (tabs cannot indent YAML; indent with spaces)"
	}
	if strings.Contains(msg, "could not find expected ':'") {
		if p, m, ok := missingColon(line, k); ok {
			return p, m
		}
	}
	if prev > 0 && (strings.Contains(msg, "mapping values are not allowed") ||
		strings.Contains(msg, "did not find expected key") && indentOf(prevLine) == indent) {
		// A line without ": " makes the next line's "key: value" part of its value, or, with
		// a comment between them, leaves that key without a mapping to be in.
		if p, m, ok := missingColon(prevLine, prev); ok {
			return p, m
		}
	}
	if m := unquotedTypeRe.FindStringSubmatchIndex(line); m != nil {
		typ := line[m[2]:m[3]]
		return at(m[2]), fmt.Sprintf("%s (quote the type, %q: unquoted, its brackets are YAML syntax)", msg, typ)
	}
	if strings.Contains(msg, "mapping values are not allowed") {
		if _, value, ok := strings.Cut(line, ": "); ok && strings.Contains(value, ": ") {
			i := len(line) - len(value)
			return at(i), msg + ` (quote a value that contains ": ")`
		}
	}
	if strings.Contains(msg, "did not find expected ',' or") || strings.Contains(msg, "expected node content") {
		if i := unclosed(line); i >= 0 {
			return at(i), fmt.Sprintf("%s (the %c here is never closed)", msg, line[i])
		}
	}
	if strings.Contains(msg, "end of stream") {
		if i := openQuote(line); i >= 0 {
			return at(i), msg + " (the quote opened here is never closed)"
		}
	}
	if strings.Contains(msg, "cannot start any token") {
		if i := strings.IndexAny(line, "@`"); i >= 0 {
			return at(i), msg + " (@ and ` cannot start a plain value: quote it)"
		}
	}
	if strings.Contains(msg, "unknown anchor") {
		if i := strings.IndexByte(line, '*'); i >= 0 {
			return at(i), msg + " (YAML aliases are not supported; write the value out)"
		}
	}
	if strings.Contains(msg, "UTF-8") || strings.Contains(msg, "control characters") {
		for i, r := range line {
			if r == utf8.RuneError || r < ' ' && r != '\t' || r == 0x7f {
				return at(i), msg
			}
		}
	}
	if prev > 0 && strings.TrimSpace(line) != "" && (strings.Contains(msg, "did not find expected") || strings.Contains(msg, "mapping values are not allowed")) {
		if pi := indentOf(prevLine); misindented(lines[:prev], indent) {
			return at(indent), fmt.Sprintf("%s (check the indentation: %s here, %s on line %d)", msg, spaces(indent), spaces(pi), prev)
		}
	}
	if strings.TrimSpace(line) == "" {
		return pos{k, 1}, msg
	}
	return at(indent), msg
}

// missingColon explains a line (number n) that holds a key without ": ", or reports !ok when
// the line has a colon or holds something other than a key.
func missingColon(line string, n int) (pos, string, bool) {
	content := strings.TrimSpace(line)
	if content == "" || strings.Contains(content, ":") || !isKeyStart(content[0]) {
		return pos{}, "", false
	}
	start := strings.Index(line, content)
	key, value, hasValue := strings.Cut(content, " ")
	col := utf8.RuneCountInString(line[:start+len(key)]) + 1
	fix := key + ":"
	if hasValue {
		fix = key + ": " + strings.TrimSpace(value)
	}
	return pos{n, col}, fmt.Sprintf("missing \": \" after %q (write %q)", key, fix), true
}

func isKeyStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

func indentOf(line string) int { return len(line) - len(strings.TrimLeft(line, " ")) }

// misindented reports whether a line indented by indent, following above, lines up with none
// of the blocks it could belong to: not a child of a line that ends in ":", not a sibling of
// the line above or of one of its parents.
func misindented(above []string, indent int) bool {
	last := -1
	for i := len(above) - 1; i >= 0; i-- {
		t := strings.TrimSpace(strings.TrimSuffix(above[i], "\r"))
		if t == "" || t[0] == '#' {
			continue
		}
		in := indentOf(above[i])
		if last < 0 {
			if indent > in && strings.HasSuffix(t, ":") {
				return false
			}
			last = in + 1
		}
		if in < last {
			if in == indent {
				return false
			}
			last = in
		}
		if in == 0 {
			break
		}
	}
	return true
}

func spaces(n int) string {
	if n == 1 {
		return "1 space"
	}
	return fmt.Sprintf("%d spaces", n)
}

// unclosed returns the index of the first { or [ of line that the line does not close, or -1.
// Quoted text is not skipped: a hint, not a parser.
func unclosed(line string) int {
	var open []int
	for i := 0; i < len(line); i++ {
		switch line[i] {
		case '{', '[':
			open = append(open, i)
		case '}', ']':
			if len(open) > 0 {
				open = open[:len(open)-1]
			}
		}
	}
	if len(open) == 0 {
		return -1
	}
	return open[0]
}

// openQuote returns the index of the quote that starts a quoted value on line and is still
// open at its end, or -1. A quote inside a plain value (don't) starts nothing.
func openQuote(line string) int {
	open := -1
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case open < 0 && c == '#' && (i == 0 || line[i-1] == ' '):
			return -1 // a comment
		case open < 0 && (c == '"' || c == '\'') && (i == 0 || strings.IndexByte(" \t[{,", line[i-1]) >= 0):
			open = i
		case open >= 0 && line[open] == '"' && c == '\\':
			i++ // an escape, as \"
		case open >= 0 && c == line[open]:
			if c == '\'' && i+1 < len(line) && line[i+1] == '\'' {
				i++ // '' is a quote inside '...'
				continue
			}
			open = -1
		}
	}
	return open
}
