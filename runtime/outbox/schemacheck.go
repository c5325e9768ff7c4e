// Schema compatibility. Each table's COMMENT says its schema version and the oldest version of
// outboxgen that may run on it, as "outboxgen schema N" or "outboxgen schema N min M". M is N
// when absent. NewWorker refuses a table whose min is above SchemaVersion. A running worker
// that sees one stops claiming, with an incident.

package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/outboxgen/outboxgen/runtime/incident"
)

// ErrSchemaTooNew is wrapped by the error of NewWorker and Migrate when a table is marked for
// a newer outboxgen than this one. Its COMMENT's min version is then above SchemaVersion.
// Retrying does not help. Deploy the newer outboxgen, or run this one on another database.
var ErrSchemaTooNew = errors.New("the outboxgen tables need a newer outboxgen")

// TableSchema is what one outboxgen table's COMMENT says of its schema.
type TableSchema struct {
	Table  string
	Exists bool
	// Version is the table's schema version. It is 1 for a table whose COMMENT names none.
	Version int
	// Min is the oldest schema version of outboxgen that may run on the table. It is Version
	// unless the COMMENT names a lower one, for a change that older workers can live with.
	Min int
	// Comment is the COMMENT as the server returned it.
	Comment string

	minNamed bool // the COMMENT names the min, else it is the version
}

// Compatible reports whether a worker of this outboxgen, of SchemaVersion, may run on the
// table. A missing table is compatible here, and NewWorker and Migrate deal with it.
func (s TableSchema) Compatible() bool {
	return !s.Exists || s.Min <= SchemaVersion
}

// TableSchemas reads the schema version and min of every outboxgen table in the database of
// db's connection, in Schema's order. A table that does not exist, or that this user has no
// privilege on, has Exists false. It fails on a COMMENT that starts like outboxgen's mark and
// cannot be read, since a newer outboxgen may have written it.
func TableSchemas(ctx context.Context, db DBTX) ([]TableSchema, error) {
	if db == nil {
		return nil, errors.New("outbox: TableSchemas: nil db")
	}
	out, err := readSchemas(ctx, db)
	if err != nil {
		return nil, fmt.Errorf("outbox: TableSchemas: %w", err)
	}
	return out, nil
}

// schemaComment is outboxgen's mark. Nine digits at most keep strconv.Atoi from overflowing.
// A longer number is no mark this outboxgen can read.
var schemaComment = regexp.MustCompile(`^outboxgen schema ([0-9]{1,9})(?: min ([0-9]{1,9}))?$`)

// schemaMarkPrefix starts every mark outboxgen writes. A COMMENT that starts with it and does not
// match schemaComment comes from an outboxgen that writes more than this one reads.
const schemaMarkPrefix = "outboxgen schema"

// parseSchemaComment reads table's COMMENT. A COMMENT that is not outboxgen's means version 1.
func parseSchemaComment(table, comment string) (TableSchema, error) {
	s := TableSchema{Table: table, Exists: true, Version: 1, Min: 1, Comment: comment}
	if !strings.HasPrefix(comment, schemaMarkPrefix) {
		return s, nil
	}
	m := schemaComment.FindStringSubmatch(comment)
	if m == nil {
		return s, fmt.Errorf("table %s has COMMENT %q, which this outboxgen (schema version %d) cannot read",
			table, comment, SchemaVersion)
	}
	s.Version, _ = strconv.Atoi(m[1]) // digits only, at most nine
	s.Min = s.Version
	if m[2] != "" {
		s.Min, _ = strconv.Atoi(m[2])
		s.minNamed = true
	}
	if s.Version < 1 || s.Min < 1 || s.Min > s.Version {
		return s, fmt.Errorf("table %s has COMMENT %q, whose min version is not between 1 and its version",
			table, comment)
	}
	return s, nil
}

// describe is how errors name a table's mark. It says "schema version 5 (min 4)", or "schema
// version 5" when the min is the version.
func (s TableSchema) describe() string {
	if s.Min == s.Version {
		return fmt.Sprintf("schema version %d", s.Version)
	}
	return fmt.Sprintf("schema version %d (min %d)", s.Version, s.Min)
}

// tooNew says why tables of s's mark need a newer outboxgen, naming both versions.
func (s TableSchema) tooNew(tables []string) string {
	what, them := "table "+tables[0]+" is", "it"
	if len(tables) > 1 {
		what, them = "tables "+strings.Join(tables, ", ")+" are", "them"
	}
	why := fmt.Sprintf("only outboxgen schema version %d or later may run on %s", s.Min, them)
	if !s.minNamed {
		why += " (a COMMENT without min allows its own version and later)"
	}
	return fmt.Sprintf("%s at %s, newer than this outboxgen's %d: %s", what, s.describe(), SchemaVersion, why)
}

// tooNewError wraps ErrSchemaTooNew around the reasons, on one line, since callers log it.
func tooNewError(reasons []string) error {
	return fmt.Errorf("%w: %s; deploy the newer outboxgen", ErrSchemaTooNew, strings.Join(reasons, "; "))
}

// schemaNames holds the quoted names of Schema's tables for schemasQuery.
var schemaNames = sync.OnceValues(func() ([]string, error) {
	tables, err := schemaTables()
	if err != nil {
		return nil, err
	}
	names := make([]string, len(tables))
	for i, t := range tables {
		names[i] = t.name
	}
	return names, nil
})

// schemasQuery reads the COMMENTs of the given tables in one statement. It is SQL in Go code for
// the reason tableQuery is. Equality and IN on TABLE_NAME let both servers open only the named
// tables, however many tables the database holds.
func schemasQuery(n int) string {
	return `SELECT TABLE_NAME, TABLE_COMMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME IN (` +
		strings.TrimSuffix(strings.Repeat("?,", n), ",") + `)`
}

func readSchemas(ctx context.Context, db DBTX) ([]TableSchema, error) {
	names, err := schemaNames()
	if err != nil {
		return nil, err
	}
	args := make([]any, len(names))
	for i, n := range names {
		args[i] = n
	}
	rows, err := db.QueryContext(ctx, schemasQuery(len(names)), args...)
	if err != nil {
		return nil, fmt.Errorf("read the table comments: %w", err)
	}
	defer rows.Close()
	found := map[string]TableSchema{}
	var unreadable []string
	for rows.Next() {
		// NULL-safe, since MariaDB's EMPTY_STRING_IS_NULL turns an empty COMMENT into NULL.
		var name string
		var comment sql.NullString
		if err := rows.Scan(&name, &comment); err != nil {
			return nil, fmt.Errorf("read the table comments: %w", err)
		}
		s, err := parseSchemaComment(name, comment.String)
		if err != nil {
			unreadable = append(unreadable, err.Error())
		}
		found[name] = s
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the table comments: %w", err)
	}
	if len(unreadable) > 0 {
		return nil, tooNewError(unreadable)
	}
	out := make([]TableSchema, len(names))
	for i, n := range names {
		if s, ok := found[n]; ok {
			out[i] = s
		} else {
			out[i] = TableSchema{Table: n}
		}
	}
	return out, nil
}

// checkSchemaCompat is NewWorker's check. It returns an error wrapping ErrSchemaTooNew, naming
// every table whose min is above SchemaVersion with both numbers.
func checkSchemaCompat(ctx context.Context, db DBTX) error {
	schemas, err := readSchemas(ctx, db)
	if err != nil {
		return err
	}
	return incompatible(schemas)
}

// incompatible is the refusal for the tables that need a newer outboxgen, nil when none does.
func incompatible(schemas []TableSchema) error {
	// Tables of one mark share one reason, since a migration marks them all alike.
	type mark struct {
		version, min int
		minNamed     bool
	}
	var marks []mark
	tables := map[mark][]string{}
	for _, s := range schemas {
		if s.Compatible() {
			continue
		}
		k := mark{s.Version, s.Min, s.minNamed}
		if tables[k] == nil {
			marks = append(marks, k)
		}
		tables[k] = append(tables[k], s.Table)
	}
	if len(marks) == 0 {
		return nil
	}
	reasons := make([]string, len(marks))
	for i, k := range marks {
		reasons[i] = TableSchema{Version: k.version, Min: k.min, minNamed: k.minNamed}.tooNew(tables[k])
	}
	return tooNewError(reasons)
}

// schemaGate is a running worker's view of the tables' compatibility. While it is held, the
// claim loop claims nothing and no hand-off is taken. Rows already claimed finish and their
// results are written. What a newer schema must not see is this worker taking rows.
type schemaGate struct {
	held atomic.Bool
	down outage // failures to read the catalog, used by the maintenance goroutine only
}

// schemaHeld reports whether the worker has stopped claiming because a table needs a newer
// outboxgen.
func (w *Worker) schemaHeld() bool { return w.schema.held.Load() }

// schemaWatch reads the tables' marks with one catalog query on every maintenance pass. A table
// marked for a newer outboxgen stops claiming and reports an incident once. A mark that goes
// back, because someone rolled the migration back, resumes claiming. A catalog that cannot be
// read changes nothing. That is no evidence of a newer schema, and the claims' own errors show
// an outage.
func (w *Worker) schemaWatch(ctx context.Context) {
	g := &w.schema
	schemas, err := readSchemas(ctx, w.db)
	var refusal error
	switch {
	case errors.Is(err, ErrSchemaTooNew):
		refusal = err // a mark this outboxgen cannot read
	case err != nil:
		if ctx.Err() == nil {
			g.down.fail(ctx, w.log, fmt.Errorf("schema check: %w", err))
		}
		return
	default:
		refusal = incompatible(schemas)
	}
	g.down.ok(ctx, w.log)
	switch {
	case refusal != nil && !g.held.Load():
		g.held.Store(true)
		w.report(ctx, incident.Incident{Kind: incident.SchemaTooNew, Subject: "outbox tables",
			Err: fmt.Errorf("this worker stops claiming: %w", refusal)})
	case refusal == nil && g.held.Load():
		g.held.Store(false)
		w.log.LogAttrs(ctx, slog.LevelInfo, "outbox worker claims again: the tables' schema allows it",
			slog.Int("schema_version", SchemaVersion))
		w.Wake()
	}
}
