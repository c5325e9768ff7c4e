// outboxgen migrate: applies the outbox schema (outbox.Migrate).

package cli

import (
	"fmt"
	"io"

	"github.com/outboxgen/outboxgen/runtime/outbox"
)

const migrateHelp = `usage: outboxgen migrate [--dsn DSN]

Applies the outbox schema (outbox.Migrate): creates the tables that are missing and leaves the
others as they are, so running it twice is harmless, and it needs the CREATE privilege only
while a table is missing. It fails, naming the table and its missing columns, when an existing
table does not match the schema. It also checks the connection settings the runtime needs.
`

func runMigrate(args []string, stdout, stderr io.Writer) int {
	c := newOpsCmd("migrate", migrateHelp, stdout, stderr)
	if code, ok := c.parse(args); !ok {
		return code
	}
	ctx, stop := opsContext()
	defer stop()
	db, code, ok := c.open(ctx)
	if !ok {
		return code
	}
	if err := outbox.Migrate(ctx, db); err != nil {
		return c.closeDB(db, c.dbErr("migrate", err))
	}
	fmt.Fprintln(c.out, "outbox schema applied (tables that already existed were left as they were)")
	return c.closeDB(db, opsExitOK)
}
