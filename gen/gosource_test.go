package gen

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A {go:} key field is accepted only when its declaration, followed through aliases,
// definitions and other packages, ends at string. The source is found where the build would
// take it: this module, a replace directory, a go.work module, the module cache (upper-case
// letters escaped as !x) or vendor/. What is not a string kind, or cannot be found, is an
// error at the key.
func TestGoKeyMustBeProvedStringKind(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("GOMODCACHE", cache)
	t.Setenv("GOWORK", "")
	dir := t.TempDir()
	files := map[string]string{
		"app/go.mod":        "module example.com/app\n\ngo 1.24\n\nrequire (\n\texample.com/dep v1.2.3\n\texample.com/Upper v0.1.0\n\texample.com/local v0.0.0\n)\n\nreplace example.com/local => ../local\n",
		"app/ids/ids.go":    "package ids\n\nimport (\n\td \"example.com/dep\"\n\t\"example.com/local\"\n\tup \"example.com/Upper/pkg\"\n)\n\ntype ID string\ntype Alias = ID\ntype Def Alias\ntype Paren (ID)\ntype Cross d.Code\ntype Local local.Name\ntype Up up.U\ntype NotStr d.Num\ntype S struct{}\ntype G[T any] string\n",
		"app/ids/x_test.go": "package ids\n\ntype OnlyInTests string\n",
		"local/go.mod":      "module example.com/local\n",
		"local/local.go":    "package local\n\ntype Name string\n",
		"work/go.mod":       "module example.com/work\n",
		"work/w.go":         "package work\n\ntype W string\n",
		"go.work":           "go 1.24\n\nuse (\n\t./app\n\t./work\n)\n",
	}
	cached := map[string]string{
		"example.com/dep@v1.2.3/dep.go":        "package dep\n\ntype Code string\ntype Num int\n",
		"example.com/!upper@v0.1.0/pkg/pkg.go": "package pkg\n\ntype U = string\n",
	}
	write := func(root string, m map[string]string) {
		for rel, content := range m {
			p := filepath.Join(root, filepath.FromSlash(rel))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			writeFile(t, p, content)
		}
	}
	write(dir, files)
	write(cache, cached)

	keys := []string{"id", "alias", "def", "paren", "cross", "local", "up", "work", "dep", "std", "notstr", "s", "g", "tests", "gone", "nomod"}
	types := []string{"example.com/app/ids.ID", "example.com/app/ids.Alias", "example.com/app/ids.Def", "example.com/app/ids.Paren",
		"example.com/app/ids.Cross", "example.com/app/ids.Local", "example.com/app/ids.Up", "example.com/work.W", "example.com/dep.Code",
		"encoding/json.Number", "example.com/app/ids.NotStr", "example.com/app/ids.S", "example.com/app/ids.G",
		"example.com/app/ids.OnlyInTests", "example.com/app/gone.ID", "example.org/nomod.ID"}
	var fields []string
	for i, k := range keys {
		fields = append(fields, k+": {go: "+types[i]+"}")
	}
	catalog := "version: 1\npackage: events\nevents:\n  a:\n    fields: {" + strings.Join(fields, ", ") + "}\n    idempotency_key: [" + strings.Join(keys, ", ") + "]\n"
	_, err := Check(filepath.Join(dir, "app", "events", "events.yaml"), []byte(catalog))
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(strings.ReplaceAll(errText(err), dir, "DIR")), "\n") {
		if _, msg, ok := strings.Cut(line, `event "a": `); ok {
			got = append(got, msg)
		}
	}
	want := []string{
		`idempotency_key "notstr": {go: example.com/app/ids.NotStr} is not a string kind: its underlying type is int`,
		`idempotency_key "s": {go: example.com/app/ids.S} is not a string kind: its underlying type is a struct`,
		`idempotency_key "g": {go: example.com/app/ids.G} is not a string kind: its underlying type is a generic type`,
		`idempotency_key "tests": cannot check that {go: example.com/app/ids.OnlyInTests} is a string kind: package example.com/app/ids (DIR/app/ids) declares no type OnlyInTests`,
		`idempotency_key "gone": cannot check that {go: example.com/app/gone.ID} is a string kind: package example.com/app/gone is not in DIR/app`,
		`idempotency_key "nomod": cannot check that {go: example.org/nomod.ID} is a string kind: no source for package example.org/nomod`,
	}
	if len(got) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("problem %d:\n got %s\nwant %s...", i, got[i], want[i])
		}
	}

	// vendor/ replaces the module cache when vendor/modules.txt exists.
	write(dir, map[string]string{"app/vendor/modules.txt": "# example.com/dep v1.2.3\n", "app/vendor/example.com/dep/dep.go": "package dep\n\ntype Code int\n"})
	_, err = Check(filepath.Join(dir, "app", "events", "events.yaml"), []byte("version: 1\npackage: events\nevents:\n  a: {fields: {c: {go: example.com/dep.Code}}, idempotency_key: [c]}\n"))
	if !strings.Contains(errText(err), "{go: example.com/dep.Code} is not a string kind: its underlying type is int") {
		t.Errorf("with vendor/: %v; want the vendored declaration (int) to count", err)
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
