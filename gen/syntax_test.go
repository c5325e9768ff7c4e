package gen

import (
	"fmt"
	"strings"
	"testing"
)

// TestSyntaxErrorPlace: a YAML syntax error points at the line of the mistake (yaml.v3 names
// the start of the enclosing block, or no line at all) with a column and, where the fix is
// known, a hint. The golden cases err_yaml_*.txt show the same in whole catalogs.
func TestSyntaxErrorPlace(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		// Tabs, wherever yaml.v3 names them or not.
		{"a: 1\n\tb: 2\n", "2:1: invalid YAML: found a tab character that violates indentation (tabs cannot indent YAML; indent with spaces)"},
		{"\ta: 1\n", "1:1: invalid YAML: found character that cannot start any token (tabs cannot indent YAML; indent with spaces)"},
		{"a:\n  - x\n  -\ty\n", "3:4: invalid YAML: found character that cannot start any token (tabs cannot indent YAML; indent with spaces)"},
		{"a:\n  b: 1\n  \tc: 2\n", "3:3: invalid YAML: found a tab character that violates indentation (tabs cannot indent YAML; indent with spaces)"},
		// A key without ": ", alone or followed by a "key: value" line.
		{"a: 1\nb\nc: 2\n", `2:2: invalid YAML: missing ": " after "b" (write "b:")`},
		{"a:\n  order_id int64\n  labels: map[string]string\n", `2:11: invalid YAML: missing ": " after "order_id" (write "order_id: int64")`},
		{"a: b: c\n", `1:4: invalid YAML: mapping values are not allowed in this context (quote a value that contains ": ")`},
		// ... with blank and comment lines between them (yaml.v3 then names another error).
		{"a:\n  x int\n  # note\n  y: string\n", `2:4: invalid YAML: missing ": " after "x" (write "x: int")`},
		{"a:\n  x int\n\n  # note\n\n  y: string\n", `2:4: invalid YAML: missing ": " after "x" (write "x: int")`},
		// Unquoted list and map types.
		{"a:\n  b: [][]int\n", `2:6: invalid YAML: did not find expected key (quote the type, "[][]int": unquoted, its brackets are YAML syntax)`},
		{"a: {b: map[string]int}\n", `1:8: invalid YAML: did not find expected ',' or '}' (quote the type, "map[string]int": unquoted, its brackets are YAML syntax)`},
		{"fields: {a: int,\n  b: []int}\n", `2:6: invalid YAML: did not find expected ',' or '}' (quote the type, "[]int": unquoted, its brackets are YAML syntax)`},
		// Indentation that matches no enclosing block; CRLF line ends count as one.
		{"a:\n  b: 1\n c: 2\n", "3:2: invalid YAML: did not find expected key (check the indentation: 1 space here, 2 spaces on line 2)"},
		{"a:\r\n  b: 1\r\n c: 2\r\n", "3:2: invalid YAML: did not find expected key (check the indentation: 1 space here, 2 spaces on line 2)"},
		{"a:\n  b: 1\n   c: 2\n", "3:4: invalid YAML: mapping values are not allowed in this context (check the indentation: 3 spaces here, 2 spaces on line 2)"},
		{"a:\n  - b\n\n  # note\n - c\n", "5:2: invalid YAML: did not find expected key (check the indentation: 1 space here, 2 spaces on line 2)"},
		// Unclosed brackets and quotes point at the opening one.
		{"a: [b\nc: 1\n", "1:4: invalid YAML: did not find expected ',' or ']' (the [ here is never closed)"},
		{"x: 1\na: \"abc\nb: 1\n", "2:4: invalid YAML: found unexpected end of stream (the quote opened here is never closed)"},
		// On line 1, where yaml.v3 names a different line for each prefix of the file.
		{"a: \"abc\nb: 1\nc: 2\n", "1:4: invalid YAML: found unexpected end of stream (the quote opened here is never closed)"},
		{"'a: 1\nb: 2\n", "1:1: invalid YAML: found unexpected end of stream (the quote opened here is never closed)"},
		{"a: [it's, 'x''y', \"z\\\"\nb: 1\n", "1:19: invalid YAML: found unexpected end of stream (the quote opened here is never closed)"},
		// Columns count characters, as yaml.v3's do.
		{"é: 1\nb: `x`\n", "2:4: invalid YAML: found character that cannot start any token (@ and ` cannot start a plain value: quote it)"},
		{"é: `x`\n", "1:4: invalid YAML: found character that cannot start any token (@ and ` cannot start a plain value: quote it)"},
		// A byte order mark is not a column.
		{"\ufeffé: `x`\n", "1:4: invalid YAML: found character that cannot start any token (@ and ` cannot start a plain value: quote it)"},
		{"\ufeffa: b: c\n", `1:4: invalid YAML: mapping values are not allowed in this context (quote a value that contains ": ")`},
		{"a: &x 1\nb: *y\n", "2:4: invalid YAML: unknown anchor 'y' referenced (YAML aliases are not supported; write the value out)"},
		{"a:\n  b: x\n  c: \x01\n", "3:6: invalid YAML: control characters are not allowed"},
		// The second document, and a file without a final line break.
		{"a: 1\n---\nb: [", "3:4: invalid YAML: did not find expected node content (the [ here is never closed)"},
	} {
		_, err := Generate("events.yaml", []byte(c.src))
		got := fmt.Sprint(err)
		if first, _, _ := strings.Cut(got, "\n"); first != "events.yaml:"+c.want {
			t.Errorf("catalog %q:\ngot  %s\nwant events.yaml:%s", c.src, got, c.want)
		}
	}
}

// TestSyntaxErrorBigFile: the search stays right, and quick, deep in a big catalog.
func TestSyntaxErrorBigFile(t *testing.T) {
	var b strings.Builder
	b.WriteString("version: 1\npackage: big\nevents:\n  e:\n    fields:\n")
	for i := range 20000 {
		fmt.Fprintf(&b, "      f%d: string\n", i)
	}
	b.WriteString("      tags: []string\n      last: int\n")
	_, err := Generate("events.yaml", []byte(b.String()))
	want := `events.yaml:20006:13: invalid YAML: did not find expected key (quote the type, "[]string": unquoted, its brackets are YAML syntax)`
	if fmt.Sprint(err) != want {
		t.Fatalf("got  %v\nwant %s", err, want)
	}
}
