package outbox

// Version is the release of outboxgen this runtime belongs to. One version covers the whole
// repository, with the root module, its extra modules and the generator. `outboxgen version`
// prints it, and release checks build module zips at it.
const Version = "v0.3.0"
