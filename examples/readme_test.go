// Package examples holds the runnable examples (each its own main package) and this test, which
// keeps README.md and the reference pages in docs/ honest: every Go and YAML snippet in them must
// be a verbatim region of a file that is compiled and tested, and every relative link must
// resolve.
package examples

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var snippetRef = regexp.MustCompile(`^<!-- snippet: (\S+) -->$`)

type block struct {
	lang, source string // source is the path named by the <!-- snippet: PATH --> line above, if any
	line         int
	body         string
}

// docPages are the pages whose snippets and links are checked, relative to this directory:
// README.md and every page of docs/.
func docPages(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join("..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) == 0 {
		t.Fatal("no page in docs/")
	}
	return append([]string{filepath.Join("..", "README.md")}, pages...)
}

// readmeBlocks returns a Markdown page's fenced code blocks. A block may be indented (inside a list
// item): its lines lose the fence's indentation.
func readmeBlocks(t *testing.T, readme string) []block {
	t.Helper()
	var (
		blocks []block
		cur    *block
		indent string
		lines  []string
		prev   string // the last non-empty line outside a block, unindented
	)
	for i, l := range strings.Split(readme, "\n") {
		trimmed := strings.TrimLeft(l, " ")
		switch {
		case cur == nil && strings.HasPrefix(trimmed, "```"):
			cur = &block{lang: strings.TrimPrefix(trimmed, "```"), line: i + 1}
			indent = l[:len(l)-len(trimmed)]
			if m := snippetRef.FindStringSubmatch(prev); m != nil {
				cur.source = m[1]
			}
			lines = nil
		case cur != nil && trimmed == "```":
			cur.body = strings.Join(lines, "\n")
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			lines = append(lines, strings.TrimPrefix(l, indent))
		case trimmed != "":
			prev = trimmed
		}
	}
	if cur != nil {
		t.Fatalf("line %d: code block never closed", cur.line)
	}
	return blocks
}

// containsIndented reports whether src holds body verbatim as consecutive lines, allowing the
// snippet to drop the region's common leading tabs (a snippet from inside a function body).
func containsIndented(src, body string) bool {
	lines := strings.Split(body, "\n")
	for depth := 0; depth <= 6; depth++ {
		indented := make([]string, len(lines))
		for i, l := range lines {
			if l != "" {
				l = strings.Repeat("\t", depth) + l
			}
			indented[i] = l
		}
		if strings.Contains(src, "\n"+strings.Join(indented, "\n")+"\n") {
			return true
		}
	}
	return false
}

func TestReadmeSnippetsAreCopiedFromTestedCode(t *testing.T) {
	total := 0
	for _, page := range docPages(t) {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		name, _ := filepath.Rel("..", page)
		if strings.Contains(string(text), "TODO") {
			t.Errorf("%s still contains TODO", name)
		}
		checked := 0
		for _, b := range readmeBlocks(t, string(text)) {
			if b.lang != "go" && b.lang != "yaml" {
				continue
			}
			if b.source == "" {
				t.Errorf("%s:%d: a ```%s block without a <!-- snippet: PATH --> line before it", name, b.line, b.lang)
				continue
			}
			// PATH is relative to the repository's root, on every page.
			src, err := os.ReadFile(filepath.Join("..", filepath.FromSlash(b.source)))
			if err != nil {
				t.Errorf("%s:%d: snippet source: %v", name, b.line, err)
				continue
			}
			// A one-line snippet (a directive) may sit inside a longer line, e.g. a help text.
			oneLine := !strings.Contains(b.body, "\n") && strings.Contains(string(src), b.body)
			if !oneLine && !containsIndented("\n"+string(src), b.body) {
				t.Errorf("%s:%d: this ```%s block is not a verbatim region of %s:\n%s", name, b.line, b.lang, b.source, b.body)
			}
			checked++
		}
		t.Logf("%s: %d snippets checked", name, checked)
		total += checked
	}
	if total == 0 {
		t.Errorf("no snippet checked: the Markdown parser is broken")
	}
}

// The commands for working on the project are exactly two, and both exist.
func TestReadmeQuickStart(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	// Near the top: a newcomer sees how to try the project before any reference.
	const nearTop = 40
	head := strings.Join(strings.SplitN(string(readme), "\n", nearTop+1)[:nearTop], "\n")
	found := false
	for _, b := range readmeBlocks(t, head) {
		if b.lang == "sh" && b.body == "scripts/demo\nscripts/test" {
			found = true
			break
		}
	}
	if !found {
		t.Fatalf("README.md: no shell block of exactly scripts/demo and scripts/test in its first %d lines", nearTop)
	}
	for _, s := range []string{"demo", "test"} {
		fi, err := os.Stat(filepath.Join("..", "scripts", s))
		if err != nil {
			t.Errorf("scripts/%s: %v", s, err)
		} else if fi.Mode()&0o111 == 0 {
			t.Errorf("scripts/%s is not executable", s)
		}
	}
}

var (
	relLink = regexp.MustCompile(`\]\(([^)#:\s]*)(#[^)\s]*)?\)`)
	heading = regexp.MustCompile(`(?m)^#{1,6} (.+)$`)
	notSlug = regexp.MustCompile(`[^\p{L}\p{N} _-]`)
)

// anchors returns the anchors GitHub gives a page's headings: lowercased, punctuation dropped,
// spaces become hyphens.
func anchors(text string) map[string]bool {
	a := map[string]bool{}
	for _, m := range heading.FindAllStringSubmatch(text, -1) {
		slug := notSlug.ReplaceAllString(strings.ToLower(strings.TrimSpace(m[1])), "")
		a[strings.ReplaceAll(slug, " ", "-")] = true
	}
	return a
}

// Every relative link in README.md, docs/ and examples/README.md names a file or directory that
// exists, and a link to a heading of a Markdown page names one the page has.
func TestReadmeLinksResolve(t *testing.T) {
	for _, doc := range append(docPages(t), "README.md") {
		text, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, m := range relLink.FindAllStringSubmatch(string(text), -1) {
			n++
			target := doc
			if m[1] != "" {
				target = filepath.Join(filepath.Dir(doc), filepath.FromSlash(m[1]))
			}
			if _, err := os.Stat(target); err != nil {
				t.Errorf("%s links to %s, which does not exist", doc, m[1])
				continue
			}
			if m[2] == "" || !strings.HasSuffix(target, ".md") {
				continue
			}
			page, err := os.ReadFile(target)
			if err != nil {
				t.Fatal(err)
			}
			if !anchors(string(page))[m[2][1:]] {
				t.Errorf("%s links to %s%s: no such heading", doc, m[1], m[2])
			}
		}
		if n == 0 && filepath.Base(doc) == "README.md" {
			t.Errorf("%s: no relative link found; the pattern is broken", doc)
		}
	}
}

// The docs hold what a newcomer needs beyond the snippets. The README shows the driver import
// and sql.Open. docs/catalog-contract.md has a section on changing events.yaml while rows are
// pending, which points to the breaking check. The demo's last words say the FAILED row was the
// point.
func TestReadmeAndDemoNewcomerNotes(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`_ "github.com/go-sql-driver/mysql"`, `sql.Open("mysql"`} {
		found := false
		for _, b := range readmeBlocks(t, string(readme)) {
			if b.lang == "go" && strings.Contains(b.body, want) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("README.md: no ```go block shows %s", want)
		}
	}

	contract, err := os.ReadFile(filepath.Join("..", "docs", "catalog-contract.md"))
	if err != nil {
		t.Fatal(err)
	}
	const heading = "## Changing events.yaml while messages are pending"
	_, section, ok := strings.Cut(string(contract), "\n"+heading+"\n")
	if !ok {
		t.Errorf("docs/catalog-contract.md: no section %q", heading)
	} else {
		if i := strings.Index(section, "\n## "); i >= 0 {
			section = section[:i]
		}
		if !strings.Contains(section, "outboxgen breaking") {
			t.Errorf("docs/catalog-contract.md: section %q does not mention `outboxgen breaking`", heading)
		}
	}

	demo, err := os.ReadFile(filepath.Join("..", "scripts", "demo"))
	if err != nil {
		t.Fatal(err)
	}
	_, end, ok := strings.Cut(string(demo), `step "demo done"`)
	if !ok {
		t.Fatalf(`scripts/demo: no step "demo done"`)
	}
	for _, want := range []string{"FAILED", "on purpose"} {
		if !strings.Contains(end, want) {
			t.Errorf("scripts/demo: the lines after its \"demo done\" step do not say %q (that the FAILED bounce was the point):\n%s", want, end)
		}
	}
}
