package gen

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// TestVersionGuard builds the repository's catalog, generated as today's generator writes it
// and as a generator older and newer than this runtime supports would have, against this
// checkout's runtime: today's builds, and each stale file fails on its guard, first, with the
// name of the fix (regenerate; upgrade the runtime).
func TestVersionGuard(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skips building generated files in a temp module")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build generated files: %v", err)
	}
	src, err := os.ReadFile(filepath.Join("..", "events.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := parse("events.yaml", src)
	if err != nil {
		t.Fatal(err)
	}
	mod := newTempModule(t)
	write := func(dir string, v int) {
		t.Helper()
		code, err := emitFileAt(m, v)
		if err != nil {
			t.Fatal(err)
		}
		mod.write(t, filepath.Join(dir, "events_outbox.go"), string(code))
	}
	write("today", generatedCodeVersion)
	write("old", outbox.MinGeneratedCodeVersion-1)
	write("new", outbox.GeneratedCodeVersion+1)

	if out, err := mod.run(goBin, "build", "./today"); err != nil {
		t.Fatalf("today's generated file does not build against today's runtime: %v\n%s", err, out)
	}
	for _, c := range []struct{ dir, fix, notFix string }{
		{"old", "overflows outbox.RegenerateWithOutboxgen", "UpgradeOutboxgenRuntime"},
		{"new", "overflows outbox.UpgradeOutboxgenRuntime", "RegenerateWithOutboxgen"},
	} {
		out, err := mod.run(goBin, "build", "./"+c.dir)
		if err == nil {
			t.Errorf("a file of a generator %s than the runtime supports built; its guard must stop the build", map[string]string{"old": "older", "new": "newer"}[c.dir])
			continue
		}
		// The first error is the one a reader acts on: it must be the guard's.
		var first string
		for _, l := range strings.Split(string(out), "\n") {
			if l != "" && !strings.HasPrefix(l, "#") {
				first = l
				break
			}
		}
		if !strings.Contains(first, "events_outbox.go:") || !strings.Contains(first, c.fix) || strings.Contains(string(out), c.notFix) {
			t.Errorf("%s file: the build's first error is %q, want one in events_outbox.go containing %q (and no %s); full output:\n%s", c.dir, first, c.fix, c.notFix, out)
		}
		t.Logf("%s file: %s", c.dir, first)
	}
}
