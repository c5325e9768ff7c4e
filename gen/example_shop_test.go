package gen

import (
	"os"
	"path/filepath"
	"testing"
)

// TestExampleShopCurrent fails when examples/shop/events_outbox.go is not what its events.yaml
// generates: run `go generate ./examples/shop` and commit.
func TestExampleShopCurrent(t *testing.T) {
	dir := filepath.Join("..", "examples", "shop")
	files, err := GenerateFile(filepath.Join(dir, "events.yaml"))
	if err != nil {
		t.Fatalf("examples/shop/events.yaml is invalid:\n%v", err)
	}
	want := filepath.Join(dir, "events_outbox.go")
	code, ok := files[want]
	if !ok || len(files) != 1 {
		t.Fatalf("examples/shop/events.yaml generates %v, want exactly %s", sortedKeys(files), want)
	}
	have, err := os.ReadFile(want)
	if err != nil {
		t.Fatalf("%v (run go generate ./examples/shop)", err)
	}
	if d := unifiedDiff(want, string(have), string(code)); d != "" {
		t.Fatalf("examples/shop is stale; run `go generate ./examples/shop` and commit:\n%s", d)
	}
}
