package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/outboxgen/outboxgen/queries"
)

// Schema returns the DDL of every outboxgen table (queries/schema.sql), for users who apply
// migrations with their own tool (goose, atlas, golang-migrate). Each statement is idempotent.
func Schema() string { return queries.Schema }

// Migrate creates the outboxgen tables that do not exist yet in the DSN's database, on a
// connection of its own: never on a caller's transaction, because MySQL commits DDL implicitly.
// It first checks the DSN as NewWorker does (parseTime=true, loc=UTC).
//
// Tables that already exist are left as they are and not created again, so an application may
// call Migrate at startup as a user with only SELECT, INSERT, UPDATE and DELETE once the tables
// exist (a DBA applied `outboxgen schema`, say); only a missing table needs the CREATE
// privilege. An existing table must have every column of Schema: Migrate fails, naming the
// table and the missing columns, when it does not (a table of the same name from before
// outboxgen), rather than let every later query fail. Column types are not compared.
func Migrate(ctx context.Context, db *sql.DB) error {
	if db == nil {
		return errors.New("outbox: Migrate: nil db")
	}
	tables, err := schemaTables()
	if err != nil {
		return fmt.Errorf("outbox: Migrate: %w", err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("outbox: Migrate: connect: %w", err)
	}
	defer conn.Close() // returns the connection to the pool; DDL leaves no session state behind
	if err := checkClock(ctx, conn); err != nil {
		return fmt.Errorf("outbox: Migrate: %w", err)
	}
	var mismatched []string
	for _, t := range tables {
		have, err := existingColumns(ctx, conn, t.name)
		if err != nil {
			return fmt.Errorf("outbox: Migrate: read the columns of %s: %w", t.name, err)
		}
		if len(have) == 0 {
			// The statement itself stays out of the error: callers log errors, often with
			// log.Fatal, and 20 lines of DDL would bury the cause.
			if _, err := conn.ExecContext(ctx, t.ddl); err != nil {
				return fmt.Errorf("outbox: Migrate: CREATE TABLE %s: %w", t.name, err)
			}
			continue
		}
		var missing []string
		for _, c := range t.columns {
			if !have[c] {
				missing = append(missing, c)
			}
		}
		if len(missing) > 0 {
			mismatched = append(mismatched, fmt.Sprintf("table %s predates or does not match outboxgen's schema: it lacks columns %s",
				t.name, strings.Join(missing, ", ")))
		}
	}
	if len(mismatched) > 0 {
		return fmt.Errorf("outbox: Migrate: %s (`outboxgen schema` prints the expected DDL; migrate or rename the table by hand)",
			strings.Join(mismatched, "; "))
	}
	return nil
}

// columnsQuery lists a table's columns in the current database; no rows means the table does
// not exist (or this user has no privilege on it). It is SQL in Go code because sqlc's MySQL
// catalog has no information_schema ("schema "information_schema" does not exist").
const columnsQuery = `SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?`

// existingColumns returns the lowercased column names of table (MySQL column names are
// case-insensitive); empty when the table does not exist.
func existingColumns(ctx context.Context, conn *sql.Conn, table string) (map[string]bool, error) {
	rows, err := conn.QueryContext(ctx, columnsQuery, table)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	have := map[string]bool{}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, err
		}
		have[strings.ToLower(name)] = true
	}
	return have, rows.Err()
}

// schemaTable is one CREATE TABLE statement of Schema.
type schemaTable struct {
	name    string
	columns []string // lowercased, in DDL order
	ddl     string
}

// schemaTables reads the table names and columns from Schema's statements, so the column
// check cannot drift from the DDL. It relies on schema.sql's layout, one column or key per
// line; TestSchemaTablesMatchCreatedTables compares the result with the tables the DDL creates.
func schemaTables() ([]schemaTable, error) {
	const prefix = "CREATE TABLE IF NOT EXISTS "
	// Lines that define keys and constraints rather than columns.
	notColumn := map[string]bool{"PRIMARY": true, "KEY": true, "INDEX": true, "UNIQUE": true,
		"CONSTRAINT": true, "FOREIGN": true, "FULLTEXT": true, "SPATIAL": true, "CHECK": true}
	var out []schemaTable
	for _, stmt := range queries.Statements() {
		lines := strings.Split(stmt, "\n")
		head, ok := strings.CutPrefix(strings.TrimSpace(lines[0]), prefix)
		if !ok || !strings.HasSuffix(head, "(") {
			return nil, fmt.Errorf("schema.sql: statement %q is not %s<name> (", lines[0], prefix)
		}
		t := schemaTable{name: strings.Trim(strings.TrimSpace(strings.TrimSuffix(head, "(")), "`"), ddl: stmt}
		for _, line := range lines[1:] {
			f := strings.Fields(line)
			if len(f) == 0 || strings.HasPrefix(f[0], ")") {
				continue
			}
			if !notColumn[strings.ToUpper(f[0])] {
				t.columns = append(t.columns, strings.ToLower(strings.Trim(f[0], "`,")))
			}
		}
		out = append(out, t)
	}
	return out, nil
}

// checkClock verifies the DSN settings the runtime relies on by scanning the database clock
// into a time.Time: without parseTime=true the driver hands back bytes and the scan fails; with
// a loc other than UTC the driver labels UTC wall times with another zone, which would shift
// every time the runtime reads.
func checkClock(ctx context.Context, db DBTX) error {
	now, err := q.ClockNow(ctx, sdb(db))
	if err != nil {
		// database/sql's conversion error is untyped; its text is stable (convertAssign):
		// "unsupported Scan, storing driver.Value type []uint8 into type *time.Time".
		if strings.Contains(err.Error(), "unsupported Scan") {
			return fmt.Errorf("DSN must set parseTime=true (scanning UTC_TIMESTAMP(6) into a time.Time failed: %w)", err)
		}
		return fmt.Errorf("connection check: %w", err)
	}
	if now.Location() != time.UTC {
		return fmt.Errorf("DSN must use loc=UTC (the driver returned times in %q)", now.Location())
	}
	return nil
}
