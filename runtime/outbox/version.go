package outbox

// Version is the release of outboxgen this runtime belongs to. One version covers the whole
// repository: the root module, its extra modules and the generator. The CLI prints it
// (outboxgen version), and release checks build module zips at it.
const Version = "v0.3.0"
