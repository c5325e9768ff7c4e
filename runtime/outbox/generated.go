package outbox

// The version guard of generated files: see "Generated code support" in the package
// documentation.

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
