package outboxconsole_test

import (
	"database/sql"
	"log/slog"
	"net/http"

	"github.com/outboxgen/outboxgen/runtime/outboxconsole"
)

// The console mounted in an application's admin server, behind that server's own
// authentication (requireAdmin here).
func ExampleNew() {
	var db *sql.DB // the application's pool, opened with parseTime=true
	var logger *slog.Logger
	admin := http.NewServeMux()

	c := outboxconsole.New(db, outboxconsole.AllowWrites(), outboxconsole.WithLogger(logger))
	defer c.Close() // stops the sampler
	admin.Handle("/outbox/", http.StripPrefix("/outbox", c))

	_ = http.ListenAndServe("127.0.0.1:9090", requireAdmin(admin))
}

func requireAdmin(h http.Handler) http.Handler { return h }
