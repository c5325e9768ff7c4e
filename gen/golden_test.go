package gen

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/ with the current output")

// A golden case is one file under testdata/golden: a free comment, then sections that start
// with a line "-- NAME --". The first section is the catalog (events.yaml); the second is
// either "error" (the exact error text) or the path of the generated file with its content.

type section struct {
	name string
	body string
}

type goldenCase struct {
	path     string
	comment  string
	sections []section
}

func parseCase(path string, data []byte) (*goldenCase, error) {
	c := &goldenCase{path: path}
	var cur *section
	for _, line := range strings.SplitAfter(string(data), "\n") {
		trimmed := strings.TrimRight(line, "\n")
		if strings.HasPrefix(trimmed, "-- ") && strings.HasSuffix(trimmed, " --") && len(trimmed) > 6 {
			c.sections = append(c.sections, section{name: strings.TrimSpace(trimmed[3 : len(trimmed)-3])})
			cur = &c.sections[len(c.sections)-1]
			continue
		}
		if cur == nil {
			c.comment += line
		} else {
			cur.body += line
		}
	}
	if len(c.sections) == 0 || c.sections[0].name != "events.yaml" {
		return nil, fmt.Errorf("%s: the first section must be -- events.yaml --", path)
	}
	return c, nil
}

func (c *goldenCase) format() []byte {
	var b bytes.Buffer
	b.WriteString(c.comment)
	for _, s := range c.sections {
		fmt.Fprintf(&b, "-- %s --\n", s.name)
		b.WriteString(s.body)
		if s.body != "" && !strings.HasSuffix(s.body, "\n") {
			b.WriteString("\n")
		}
	}
	return b.Bytes()
}

// run generates the case's catalog and returns the sections it should have after it.
func (c *goldenCase) run() []section {
	files, err := Generate("events.yaml", []byte(c.sections[0].body))
	if err != nil {
		return []section{{name: "error", body: err.Error() + "\n"}}
	}
	var out []section
	for _, p := range sortedKeys(files) {
		out = append(out, section{name: filepath.ToSlash(p), body: string(files[p])})
	}
	return out
}

func loadGoldens(t *testing.T) []*goldenCase {
	t.Helper()
	paths, err := filepath.Glob("testdata/golden/*.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) < 20 {
		t.Fatalf("found %d golden cases under testdata/golden, want at least 20", len(paths))
	}
	sort.Strings(paths)
	var cases []*goldenCase
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		c, err := parseCase(p, data)
		if err != nil {
			t.Fatal(err)
		}
		cases = append(cases, c)
	}
	return cases
}

// TestGolden checks every case's output or error text byte for byte; -update rewrites them.
func TestGolden(t *testing.T) {
	for _, c := range loadGoldens(t) {
		t.Run(strings.TrimSuffix(filepath.Base(c.path), ".txt"), func(t *testing.T) {
			got := c.run()
			if *update {
				c.sections = append(c.sections[:1], got...)
				if err := os.WriteFile(c.path, c.format(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want := c.sections[1:]
			if len(want) != len(got) {
				t.Fatalf("%s: got %d output sections (%s), want %d; run go test ./gen -update and review the diff", c.path, len(got), names(got), len(want))
			}
			for i := range want {
				if want[i].name != got[i].name || want[i].body != got[i].body {
					t.Errorf("%s: section %q differs from the golden %q (run go test ./gen -update and review):\n%s",
						c.path, got[i].name, want[i].name, unifiedDiff(want[i].name, want[i].body, got[i].body))
				}
			}
			// Determinism: a second run gives the same bytes.
			again := c.run()
			for i := range got {
				if again[i].body != got[i].body {
					t.Errorf("%s: two runs differ in %s", c.path, got[i].name)
				}
			}
		})
	}
}

func names(ss []section) string {
	var n []string
	for _, s := range ss {
		n = append(n, s.name)
	}
	return strings.Join(n, ", ")
}
