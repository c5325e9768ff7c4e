// outboxgen schema: prints the DDL, or with --upgrade what one database still needs.

package cli

import (
	"fmt"
	"io"

	"github.com/outboxgen/outboxgen/runtime/outbox"
)

const schemaHelp = `usage: outboxgen schema
       outboxgen schema --upgrade [--dsn DSN]

Without --upgrade, prints the DDL of the current schema version (for goose, atlas,
golang-migrate); every statement is idempotent. With --upgrade, connects to the database and
prints only the statements it still needs (outbox.SchemaUpgrade): CREATE TABLE for a missing
table, ALTER TABLE for a table of an earlier schema version, nothing when it is current (or of a
later version whose COMMENT, 'outboxgen schema N min M', lets this outboxgen run on it). It
changes nothing; outboxgen migrate (or outbox.Migrate) applies the same statements.
`

func runSchema(args []string, stdout, stderr io.Writer) int {
	c := newOpsCmd("schema", schemaHelp, stdout, stderr)
	upgrade := c.fs.Bool("upgrade", false, "print what the database of --dsn still needs")
	if code, ok := c.parse(args); !ok {
		return code
	}
	if !*upgrade {
		if c.dsnArg != "" {
			return c.usageErr("--dsn is for --upgrade; without it, schema prints the whole DDL")
		}
		fmt.Fprint(c.out, outbox.Schema())
		return opsExitOK
	}
	ctx, stop := opsContext()
	defer stop()
	db, code, ok := c.open(ctx)
	if !ok {
		return code
	}
	stmts, err := outbox.SchemaUpgrade(ctx, db)
	if err != nil {
		return c.closeDB(db, c.dbErr("schema --upgrade", err))
	}
	if len(stmts) == 0 {
		at, err := reached(ctx, db)
		if err != nil {
			return c.closeDB(db, c.dbErr("schema --upgrade", err))
		}
		fmt.Fprintf(c.out, "-- The outboxgen tables are at %s: nothing to do.\n", at)
		return c.closeDB(db, opsExitOK)
	}
	fmt.Fprintf(c.out, "-- What this database needs to reach outboxgen schema version %d.\n", outbox.SchemaVersion)
	for _, s := range stmts {
		fmt.Fprintf(c.out, "%s;\n\n", c.text(s)) // built from what the database reports
	}
	return c.closeDB(db, opsExitOK)
}
