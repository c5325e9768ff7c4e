// outboxgen migrate: applies the outbox schema (outbox.Migrate).

package cli

import (
	"context"
	"database/sql"
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

Each table's COMMENT records its schema version and the oldest version of outboxgen that may run
on it ('outboxgen schema N min M'; M = N when absent). Tables of a later version are left alone
when this outboxgen may still run on them; otherwise migrate fails, naming both versions.
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
	at, err := reached(ctx, db)
	if err != nil {
		return c.closeDB(db, c.dbErr("migrate", err))
	}
	fmt.Fprintf(c.out, "outbox schema applied: the tables are at %s\n", at)
	return c.closeDB(db, opsExitOK)
}

// reached says which schema version the tables are at once nothing is left to do: this
// outboxgen's, or a later one whose min still lets this outboxgen run on them (an older
// instance of a rolling deploy).
func reached(ctx context.Context, db *sql.DB) (string, error) {
	schemas, err := outbox.TableSchemas(ctx, db)
	if err != nil {
		return "", err
	}
	version, minimum := outbox.SchemaVersion, 0
	for _, s := range schemas {
		if s.Exists && s.Version > outbox.SchemaVersion {
			version, minimum = max(version, s.Version), max(minimum, s.Min)
		}
	}
	if version == outbox.SchemaVersion {
		return fmt.Sprintf("schema version %d", version), nil
	}
	return fmt.Sprintf("schema version %d (min %d), newer than this outboxgen's %d, which may run on them", version, minimum, outbox.SchemaVersion), nil
}
