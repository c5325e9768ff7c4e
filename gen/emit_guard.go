package gen

import (
	"fmt"

	"github.com/dave/jennifer/jen"

	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// generatedCodeVersion is the version stamped in each file's guard: that of the runtime of
// this release, which compiles it.
const generatedCodeVersion = outbox.GeneratedCodeVersion

// genVersionGuard emits the file's version guard, in the shape of protoc-gen-go's
// protoimpl.EnforceVersion: each constant conversion overflows, failing the build on a name
// that spells the fix, when the runtime cannot compile a file of generator version v.
func (g *emitter) genVersionGuard(v int) {
	g.commentf("outboxgen v0.%d wrote this file. These constants stop the build when the runtime in go.mod (github.com/outboxgen/outboxgen) cannot run it.", v)
	g.f.Const().Defs(
		jen.Comment(commentText("\"overflows outbox.RegenerateWithOutboxgen\": this file is older than the runtime supports; run go generate with the outboxgen of the runtime's release (go tool outboxgen runs that one).")),
		jen.Id("_").Op("=").Qual(outboxPkg, "RegenerateWithOutboxgen").Call(jen.Lit(v).Op("-").Qual(outboxPkg, "MinGeneratedCodeVersion")),
		jen.Comment(commentText(fmt.Sprintf("\"overflows outbox.UpgradeOutboxgenRuntime\": the runtime is older than this file; go get github.com/outboxgen/outboxgen@v0.%d or later.", v))),
		jen.Id("_").Op("=").Qual(outboxPkg, "UpgradeOutboxgenRuntime").Call(jen.Qual(outboxPkg, "GeneratedCodeVersion").Op("-").Lit(v)),
	)
	g.f.Line()
}
