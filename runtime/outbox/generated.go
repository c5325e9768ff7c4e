package outbox

// Generated code support.
//
// The files outboxgen generates call the functions and types of this file's siblings
// (genkey.go, genpayload.go, gensend.go) instead of carrying copies of them, so a fix reaches
// every generated file with a runtime upgrade, without regenerating. They are exported for
// generated code, not for hand use. Their behaviour is part of the stored data: an
// idempotency or ordering key they compute today must stay byte for byte the same in every
// later release, or rows already written stop matching new ones.
//
// A generated file also carries a version guard, in the shape of protoc-gen-go's
// protoimpl.EnforceVersion: two constant conversions that the compiler checks, never build
// information read at run time.
//
//	const (
//		_ = outbox.RegenerateWithOutboxgen(3 - outbox.MinGeneratedCodeVersion)
//		_ = outbox.UpgradeOutboxgenRuntime(outbox.GeneratedCodeVersion - 3)
//	)
//
// 3 is the version of the generator that wrote the file. A file older than this runtime
// supports fails to build with "constant -1 overflows outbox.RegenerateWithOutboxgen": run go
// generate with the outboxgen of the runtime's release (go tool outboxgen does, since the
// tool and the runtime are one module). A file newer than this runtime fails with "constant
// -1 overflows outbox.UpgradeOutboxgenRuntime": go get the github.com/outboxgen/outboxgen
// release that generated it (the file's comment names it).

// Versions of generated code this runtime compiles.
const (
	// GeneratedCodeVersion is the version of the code this release's generator writes, and the
	// newest this runtime compiles. It is the minor number of the release that last changed
	// what generated code needs of the runtime: a file it stamps needs outboxgen v0.N or later.
	GeneratedCodeVersion = 3
	// MinGeneratedCodeVersion is the oldest generated code this runtime compiles. It rises
	// only when the runtime drops or changes a helper that older generated code calls.
	MinGeneratedCodeVersion = 3
)

// RegenerateWithOutboxgen is the type of a generated file's guard against being older than
// the runtime supports: the file converts its version minus MinGeneratedCodeVersion to it,
// which overflows when negative. The fix its name spells: regenerate the file with the
// outboxgen of the runtime's release.
type RegenerateWithOutboxgen uint

// UpgradeOutboxgenRuntime is the type of a generated file's guard against being newer than
// the runtime: the file converts GeneratedCodeVersion minus its version to it, which
// overflows when negative. The fix its name spells: upgrade the github.com/outboxgen/outboxgen
// module to the release that generated the file.
type UpgradeOutboxgenRuntime uint
