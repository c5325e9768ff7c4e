package cli

import (
	"runtime/debug"
	"testing"

	"github.com/outboxgen/outboxgen/runtime/outbox"
)

func TestVersionBuildDetail(t *testing.T) {
	const path = "github.com/outboxgen/outboxgen"
	asTool := func(m debug.Module) *debug.BuildInfo {
		return &debug.BuildInfo{Main: debug.Module{Path: "example.com/app", Version: "(devel)"}, Deps: []*debug.Module{&m}}
	}
	for _, c := range []struct {
		name string
		info *debug.BuildInfo
		want string
	}{
		{"no build info", nil, ""},
		{"this repository", &debug.BuildInfo{Main: debug.Module{Path: path, Version: "(devel)"}}, ""},
		{"go install at the release", &debug.BuildInfo{Main: debug.Module{Path: path, Version: outbox.Version}}, ""},
		{"go install of an untagged commit", &debug.BuildInfo{Main: debug.Module{Path: path, Version: "v0.3.1-0.20260101000000-abcdefabcdef"}},
			"module v0.3.1-0.20260101000000-abcdefabcdef"},
		{"tool of another module, at the release", asTool(debug.Module{Path: path, Version: outbox.Version}), ""},
		{"tool of another module, replaced", asTool(debug.Module{Path: path, Version: outbox.Version, Replace: &debug.Module{Path: "../outboxgen"}}),
			"replaced by ../outboxgen"},
		{"tool of another module that lacks ours", &debug.BuildInfo{Main: debug.Module{Path: "example.com/app"}}, ""},
	} {
		if got := buildDetail(c.info); got != c.want {
			t.Errorf("%s: buildDetail = %q, want %q", c.name, got, c.want)
		}
	}
}
