package outboxconsole

import (
	"context"
	"net/http"
)

// The read pages: overview, failed, message, jobs. Each runs the runtime's own calls
// (outbox.Stats, Retry's dry run, Inspect, mysqllock.LastRuns) or the console's list query, so
// the console, the CLI and an application's dashboard agree.

// ctx bounds a page's database calls by the request and WithQueryTimeout.
func (c *Console) ctx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), c.cfg.timeout)
}
