package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// copyTree copies what the lint reads (go.mod, go.work and Go files) of the repository to a
// temporary directory, for a test to break.
func copyTree(t *testing.T) string {
	t.Helper()
	src, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			if p != src && skipDir(d.Name()) {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		if n := d.Name(); n != "go.mod" && n != "go.work" && !strings.HasSuffix(n, ".go") {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

func appendFile(t *testing.T, p, text string) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
}

// TestCheckRefuses breaks a copy of the tree in each way that stops a module from installing
// outside the repository and expects the check to fail naming the file; the unbroken copy
// passes.
func TestCheckRefuses(t *testing.T) {
	quiet := func(string) {}
	if err := run(copyTree(t), false, true, quiet); err != nil {
		t.Fatalf("the repository as it is: %v", err)
	}
	for _, c := range []struct {
		name    string
		breakIt func(root string)
		want    []string
	}{
		{"replace in an extra module's go.mod", func(root string) {
			appendFile(t, filepath.Join(root, "runtime/outboxprom/go.mod"), "\nreplace github.com/outboxgen/outboxgen => ../..\n")
		}, []string{"runtime/outboxprom/go.mod:", "replace github.com/outboxgen/outboxgen", "no replace directive"}},
		{"import of the root module's internal package", func(root string) {
			p := filepath.Join(root, "runtime/outboxnats/internal_import.go")
			if err := os.WriteFile(p, []byte("package outboxnats\n\nimport _ \"github.com/outboxgen/outboxgen/internal/termesc\"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, []string{"runtime/outboxnats/internal_import.go:3: imports github.com/outboxgen/outboxgen/internal/termesc, an internal package of module github.com/outboxgen/outboxgen"}},
		{"a test's import of runtime/internal", func(root string) {
			p := filepath.Join(root, "runtime/outboxkafka/store_test.go")
			if err := os.WriteFile(p, []byte("package outboxkafka\n\nimport _ \"github.com/outboxgen/outboxgen/runtime/internal/store\"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, []string{"runtime/outboxkafka/store_test.go:3: imports github.com/outboxgen/outboxgen/runtime/internal/store"}},
		{"requirement at another version", func(root string) {
			p := filepath.Join(root, "runtime/outboxotel/go.mod")
			data, _ := os.ReadFile(p)
			if err := os.WriteFile(p, []byte(strings.Replace(string(data), "github.com/outboxgen/outboxgen v0.3.0", "github.com/outboxgen/outboxgen v0.0.0", 1)), 0o644); err != nil {
				t.Fatal(err)
			}
		}, []string{"runtime/outboxotel/go.mod:", "requires github.com/outboxgen/outboxgen v0.0.0, want the release"}},
		{"a new published module the trial does not use", func(root string) {
			if err := os.MkdirAll(filepath.Join(root, "runtime/outboxsqs"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(root, "runtime/outboxsqs/go.mod"), []byte("module github.com/outboxgen/outboxgen/runtime/outboxsqs\n\ngo 1.24.0\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, []string{"runtime/outboxsqs/go.mod: module github.com/outboxgen/outboxgen/runtime/outboxsqs is published, but the trial program does not use it"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := copyTree(t)
			c.breakIt(root)
			err := run(root, false, false, quiet)
			if err == nil {
				t.Fatal("the check passed")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}
