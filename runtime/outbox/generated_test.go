package outbox_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// TestGeneratedCodeVersions: the range of generated code the runtime compiles is not empty,
// and a file's guard comment may say "outboxgen v0.N": N is at most this release's minor.
func TestGeneratedCodeVersions(t *testing.T) {
	if outbox.MinGeneratedCodeVersion > outbox.GeneratedCodeVersion {
		t.Fatalf("MinGeneratedCodeVersion %d > GeneratedCodeVersion %d: this runtime would compile no generated file", outbox.MinGeneratedCodeVersion, outbox.GeneratedCodeVersion)
	}
	rest, ok := strings.CutPrefix(outbox.Version, "v0.")
	if !ok {
		t.Fatalf("Version %q is not v0.x: generated files name their runtime as v0.<GeneratedCodeVersion>; choose how they name a v1 one", outbox.Version)
	}
	minor, err := strconv.Atoi(strings.SplitN(rest, ".", 2)[0])
	if err != nil || minor < outbox.GeneratedCodeVersion {
		t.Fatalf("Version %q: GeneratedCodeVersion %d must be the minor of this release or an older one", outbox.Version, outbox.GeneratedCodeVersion)
	}
}
