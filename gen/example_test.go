package gen

import (
	"os"
	"path/filepath"
	"testing"
)

// TestExampleEventsCurrent fails when examples/events/events_outbox.go is not what the
// repository's events.yaml generates: run `go generate ./examples/events` and commit.
func TestExampleEventsCurrent(t *testing.T) {
	files, err := GenerateFile(filepath.Join("..", "events.yaml"))
	if err != nil {
		t.Fatalf("the repository's events.yaml is invalid:\n%v", err)
	}
	want := filepath.Join("..", "examples", "events", "events_outbox.go")
	code, ok := files[want]
	if !ok || len(files) != 1 {
		t.Fatalf("events.yaml generates %v, want exactly %s", sortedKeys(files), want)
	}
	have, err := os.ReadFile(want)
	if err != nil {
		t.Fatalf("%v (run go generate ./examples/events)", err)
	}
	if d := unifiedDiff(want, string(have), string(code)); d != "" {
		t.Fatalf("examples/events is stale; run `go generate ./examples/events` and commit:\n%s", d)
	}
}
