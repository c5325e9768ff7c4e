package outbox

// The version guard of generated files. "Generated code support" in the package
// documentation describes it.

// Versions of generated code this runtime compiles.
const (
	// GeneratedCodeVersion is the version of the code this release's generator writes, and the
	// newest this runtime compiles. It is the minor number N of the release that last changed
	// what generated code needs of the runtime. A file it stamps needs outboxgen v0.N or later.
	GeneratedCodeVersion = 3
	// MinGeneratedCodeVersion is the oldest generated code this runtime compiles. It rises
	// only when the runtime drops or changes a helper that older generated code calls.
	MinGeneratedCodeVersion = 3
)

// RegenerateWithOutboxgen is the type of a generated file's guard against being older than
// the runtime supports. The file converts its version minus MinGeneratedCodeVersion to it,
// which overflows when negative. Its name spells the fix, which is to regenerate the file with
// the outboxgen of the runtime's release.
type RegenerateWithOutboxgen uint

// UpgradeOutboxgenRuntime is the type of a generated file's guard against being newer than
// the runtime. The file converts GeneratedCodeVersion minus its version to it, which overflows
// when negative. Its name spells the fix, which is to upgrade the github.com/outboxgen/outboxgen
// module to the release that generated the file.
type UpgradeOutboxgenRuntime uint
