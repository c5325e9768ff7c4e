// outboxgen migrate: applies the outbox schema (outbox.Migrate).

package cli

import (
	"fmt"
	"io"

	"github.com/outboxgen/outboxgen/runtime/outbox"
)

const migrateHelp = `usage: outboxgen migrate [--dsn DSN]

Brings the outbox tables to the current schema version (outbox.Migrate): creates the tables that
are missing, upgrades tables of an earlier version in place (outboxgen schema --upgrade prints
those statements without running them), and checks the others' columns, types and collations,
so running it twice is harmless. It needs the CREATE or ALTER privilege only while a table is
missing or old. It fails, naming each table and column, when a table does not match the schema,
and it checks the connection settings the runtime needs.
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
	fmt.Fprintf(c.out, "outbox schema applied: the tables are at schema version %d\n", outbox.SchemaVersion)
	return c.closeDB(db, opsExitOK)
}
