package outbox

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/outboxgen/outboxgen/queries"
)

// Schema returns the DDL of every outboxgen table, from queries/schema.sql. It serves users who
// apply migrations with their own tool, such as goose, atlas or golang-migrate. Each statement
// is idempotent.
func Schema() string { return queries.Schema }

// Migrate brings the outboxgen tables of the DSN's database to SchemaVersion, on a connection
// of its own. It never runs on a caller's transaction, because MySQL commits DDL implicitly. It
// first checks the DSN as NewWorker does, for parseTime=true and a loc of offset zero. It also
// checks that the server can run the worker's READ COMMITTED writes, which
// binlog_format=STATEMENT forbids.
//
//   - A missing table is created. This needs the CREATE privilege.
//   - A table of an earlier version is upgraded in place with the statements SchemaUpgrade
//     lists. Each table's COMMENT records its version, and a table without one is version 1.
//     The upgrade keeps every row with its status, lease and claim token. Workers running
//     during the upgrade wait for the ALTER and go on after it.
//   - The upgrade from version 1 to 2 changes column types, which copies the table on every
//     server. Writes to it wait for the copy. On a large table, apply SchemaUpgrade's
//     statements with an online tool such as gh-ost or pt-online-schema-change instead.
//   - A table at the current version is checked. Every column must exist with its type, and
//     text columns must be utf8mb4. The error names each table and column, what it is and what
//     it should be. Otherwise every later query could fail or compare keys case-blind.
//   - A table of a later version is left alone when its COMMENT allows this version to run on
//     it, with "outboxgen schema N min M" and M <= SchemaVersion. That marks an additive
//     change, and an older instance of a rolling deploy still starts. Otherwise Migrate
//     changes nothing and fails, naming both versions, with an error that wraps
//     ErrSchemaTooNew.
//
// Tables that are current are left as they are. An application may therefore call Migrate at
// startup as a user with only SELECT, INSERT, UPDATE and DELETE once the tables exist. Two
// processes calling Migrate at once take turns under a named lock per database. The second
// finds nothing to do.
func Migrate(ctx context.Context, db *sql.DB) error {
	if db == nil {
		return errors.New("outbox: Migrate: nil db")
	}
	err := withMigrateConn(ctx, db, func(conn *sql.Conn, tables []schemaTable) error {
		// Every table is read before any is altered. A table that needs a newer outboxgen
		// stops the whole migration, rather than leave the others half upgraded beside it.
		plans := make([][]string, len(tables))
		errs := make([]error, len(tables))
		marks := make([]TableSchema, len(tables))
		for i, t := range tables {
			st, err := readTable(ctx, conn, t.name)
			if err != nil {
				return err
			}
			marks[i] = st.mark
			plans[i], errs[i] = upgradeStatements(t, st)
		}
		if err := incompatible(marks); err != nil {
			return err
		}
		// A table that is not outboxgen's does not stop the others from being created.
		var problems []string
		for i, t := range tables {
			var mismatch mismatchError
			if errors.As(errs[i], &mismatch) {
				problems = append(problems, mismatch.msg)
				continue
			}
			if errs[i] != nil {
				return errs[i]
			}
			for _, stmt := range plans[i] {
				// The statement itself stays out of the error. Callers log errors, often with
				// log.Fatal, and 20 lines of DDL would bury the cause.
				if err := execDDL(ctx, conn, stmt); err != nil {
					return fmt.Errorf("%s %s: %w", ddlVerb(stmt), t.name, err)
				}
			}
			st, err := readTable(ctx, conn, t.name)
			if err != nil {
				return err
			}
			problems = append(problems, t.check(st)...)
		}
		if len(problems) > 0 {
			return fmt.Errorf("%s (`outboxgen schema` prints the expected DDL; migrate or rename the table by hand)",
				strings.Join(problems, "; "))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("outbox: Migrate: %w", err)
	}
	return nil
}

// SchemaUpgrade returns the statements that Migrate would run on the DSN's database to bring
// its outboxgen tables to SchemaVersion. A missing table gets CREATE TABLE, a table of an
// earlier version ALTER TABLE, and a current one nothing. It changes nothing. `outboxgen
// schema --upgrade --dsn ...` prints them for users who apply migrations with their own tool.
func SchemaUpgrade(ctx context.Context, db *sql.DB) ([]string, error) {
	if db == nil {
		return nil, errors.New("outbox: SchemaUpgrade: nil db")
	}
	var out []string
	err := withMigrateConn(ctx, db, func(conn *sql.Conn, tables []schemaTable) error {
		var errs []error
		marks := make([]TableSchema, len(tables))
		for i, t := range tables {
			st, err := readTable(ctx, conn, t.name)
			if err != nil {
				return err
			}
			marks[i] = st.mark
			stmts, err := upgradeStatements(t, st)
			errs = append(errs, err)
			out = append(out, stmts...)
		}
		// The tables that need a newer outboxgen are named together, before other problems.
		if err := incompatible(marks); err != nil {
			return err
		}
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("outbox: SchemaUpgrade: %w", err)
	}
	return out, nil
}

// SchemaVersion is the version of the tables that Schema creates and Migrate upgrades to.
const SchemaVersion = queries.SchemaVersion

// migrateLockWait bounds how long Migrate waits for another process's migration.
const migrateLockWait = 120 // seconds

// withMigrateConn runs fn on one connection of db, after the DSN checks, holding the database's
// migration lock.
func withMigrateConn(ctx context.Context, db *sql.DB, fn func(*sql.Conn, []schemaTable) error) (err error) {
	tables, err := schemaTables()
	if err != nil {
		return err
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer func() {
		// The named lock belongs to the session. A connection whose release failed is closed
		// rather than pooled, which ends the session and frees the lock. database/sql drops a
		// connection whose Raw returns ErrBadConn.
		if err != nil {
			_ = conn.Raw(func(any) error { return driver.ErrBadConn }) // always ErrBadConn, which is the point
		}
		if cerr := conn.Close(); cerr != nil && err == nil && !errors.Is(cerr, sql.ErrConnDone) {
			err = fmt.Errorf("return connection: %w", cerr)
		}
	}()
	if err := checkClock(ctx, conn); err != nil {
		return err
	}
	if err := checkBinlog(ctx, conn); err != nil {
		return err
	}
	got, err := q.MigrateLock(ctx, conn, migrateLockWait)
	if err != nil {
		return fmt.Errorf("take the migration lock: %w", err)
	}
	if got != 1 {
		return fmt.Errorf("another migration of this database still runs after %ds (named lock outboxgen.migrate.*)", migrateLockWait)
	}
	if err := fn(conn, tables); err != nil {
		return err
	}
	// A release that fails returns an error, and the deferred Raw destroys the session.
	released, err := q.MigrateUnlock(context.WithoutCancel(ctx), conn)
	if err != nil {
		return fmt.Errorf("release the migration lock: %w", err)
	}
	if released != 1 {
		return fmt.Errorf("release the migration lock: RELEASE_LOCK returned %d, want 1", released)
	}
	return nil
}

// instantClause is how an upgrade in queries/upgrades asks for online DDL. A server that
// cannot do the change in place refuses the clause with error 1845 or 1846. The statement then
// runs again with the server's default algorithm.
var instantClause = regexp.MustCompile(`(?i),\s*ALGORITHM\s*=\s*INSTANT\s*$`)

func execDDL(ctx context.Context, conn *sql.Conn, stmt string) error {
	_, err := conn.ExecContext(ctx, stmt)
	var me *mysql.MySQLError
	if err != nil && instantClause.MatchString(stmt) && errors.As(err, &me) && (me.Number == 1845 || me.Number == 1846) {
		_, err = conn.ExecContext(ctx, instantClause.ReplaceAllString(stmt, ""))
	}
	return err
}

func ddlVerb(stmt string) string {
	f := strings.Fields(stmt)
	if len(f) >= 2 {
		return f[0] + " " + f[1]
	}
	return stmt
}

// tableState is what information_schema says of one table.
type tableState struct {
	exists  bool
	version int                   // from the COMMENT, or 1 when it has none
	min     int                   // the oldest outboxgen that may run on it
	mark    TableSchema           // the COMMENT read
	columns map[string]columnInfo // by lowercased name
	keys    map[string]bool       // index names, lowercased
}

type columnInfo struct {
	columnType string // COLUMN_TYPE, normalised by normType
	charset    string // CHARACTER_SET_NAME, or "" for non-text types
	collation  string
}

// tableQuery and columnsQuery read the catalog of the current database. They are SQL in Go
// code because sqlc's MySQL catalog has no information_schema. No rows means the table does
// not exist, or this user has no privilege on it.
const (
	tableQuery = `SELECT TABLE_COMMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?`
	// NULLs are scanned as such. COALESCE(x, empty string) is NULL under MariaDB's
	// EMPTY_STRING_IS_NULL.
	columnsQuery = `SELECT COLUMN_NAME, COLUMN_TYPE, CHARACTER_SET_NAME, COLLATION_NAME
FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?`
	keysQuery = `SELECT DISTINCT INDEX_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?`
)

func readTable(ctx context.Context, conn *sql.Conn, table string) (tableState, error) {
	st := tableState{columns: map[string]columnInfo{}, keys: map[string]bool{}}
	var comment sql.NullString // NULL under MariaDB's EMPTY_STRING_IS_NULL
	switch err := conn.QueryRowContext(ctx, tableQuery, table).Scan(&comment); {
	case errors.Is(err, sql.ErrNoRows):
		return st, nil
	case err != nil:
		return st, fmt.Errorf("read table %s: %w", table, err)
	}
	mark, err := parseSchemaComment(table, comment.String)
	if err != nil {
		// A mark this outboxgen cannot read is a newer outboxgen's. Neither upgrade nor check it.
		return st, tooNewError([]string{err.Error()})
	}
	st.exists, st.version, st.min, st.mark = true, mark.Version, mark.Min, mark
	rows, err := conn.QueryContext(ctx, columnsQuery, table)
	if err != nil {
		return st, fmt.Errorf("read the columns of %s: %w", table, err)
	}
	defer rows.Close()
	for rows.Next() {
		var name, typ string
		var charset, collation sql.NullString
		if err := rows.Scan(&name, &typ, &charset, &collation); err != nil {
			return st, fmt.Errorf("read the columns of %s: %w", table, err)
		}
		c := columnInfo{columnType: normType(typ), charset: charset.String, collation: collation.String}
		st.columns[strings.ToLower(name)] = c
	}
	if err := rows.Err(); err != nil {
		return st, fmt.Errorf("read the columns of %s: %w", table, err)
	}
	return st, readKeys(ctx, conn, table, st.keys)
}

func readKeys(ctx context.Context, conn *sql.Conn, table string, keys map[string]bool) error {
	rows, err := conn.QueryContext(ctx, keysQuery, table)
	if err != nil {
		return fmt.Errorf("read the indexes of %s: %w", table, err)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return fmt.Errorf("read the indexes of %s: %w", table, err)
		}
		keys[strings.ToLower(name)] = true
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read the indexes of %s: %w", table, err)
	}
	return nil
}

// upgradeStatements is what table t needs. That is CREATE when missing, the ALTERs of every
// later version when older, and nothing when current.
func upgradeStatements(t schemaTable, st tableState) ([]string, error) {
	if !st.exists {
		return []string{t.ddl}, nil
	}
	if st.version > SchemaVersion {
		if !st.mark.Compatible() {
			return nil, tooNewError([]string{st.mark.tooNew([]string{t.name})})
		}
		// A newer outboxgen migrated it and says this one may still run on it. A rolling
		// deploy whose old instances call Migrate at start must not stop there.
		return nil, nil
	}
	if st.version == SchemaVersion {
		return nil, nil
	}
	// An older table must at least have the columns of every version. Otherwise it is another
	// program's table of the same name, refused before any ALTER.
	var missing []string
	for _, c := range t.columns {
		if _, ok := st.columns[c.name]; !ok && c.since <= st.version {
			missing = append(missing, c.name)
		}
	}
	if len(missing) > 0 {
		return nil, mismatchError{fmt.Sprintf("table %s predates or does not match outboxgen's schema: it lacks columns %s",
			t.name, strings.Join(missing, ", "))}
	}
	ups, err := queries.Upgrades()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, u := range ups {
		if u.Version <= st.version {
			continue
		}
		for _, stmt := range u.Statements {
			if alterTarget(stmt) != t.name {
				continue
			}
			// An upgrade stopped after this statement left the column, and MySQL has no ADD
			// COLUMN IF NOT EXISTS.
			if c := addedColumn(stmt); c != "" {
				if _, ok := st.columns[c]; ok {
					continue
				}
			}
			if k := addedKey(stmt); k != "" && st.keys[k] {
				continue
			}
			out = append(out, stmt)
		}
	}
	return out, nil
}

// addColumnOnly matches an ALTER TABLE whose one change is ADD COLUMN, with an optional
// ALGORITHM clause.
var addColumnOnly = regexp.MustCompile(`(?is)^ALTER\s+TABLE\s+\S+\s+ADD\s+COLUMN\s+` + "`?" + `([A-Za-z_][A-Za-z0-9_]*)` + "`?" + `\s+[^,]+(,\s*ALGORITHM\s*=\s*\w+)?\s*$`)

// addedColumn is the lowercased column of an ALTER TABLE that only adds it, else "".
func addedColumn(stmt string) string {
	if m := addColumnOnly.FindStringSubmatch(strings.TrimSpace(stmt)); m != nil {
		return strings.ToLower(m[1])
	}
	return ""
}

// addKeyOnly matches an ALTER TABLE whose one change is ADD KEY, with optional ALGORITHM and
// LOCK clauses.
var addKeyOnly = regexp.MustCompile(`(?is)^ALTER\s+TABLE\s+\S+\s+ADD\s+(?:KEY|INDEX)\s+` + "`?" + `([A-Za-z_][A-Za-z0-9_]*)` + "`?" + `\s*\([^)]*\)(\s*,\s*(ALGORITHM|LOCK)\s*=\s*\w+)*\s*$`)

// addedKey is the lowercased index of an ALTER TABLE that only adds it, else "".
func addedKey(stmt string) string {
	if m := addKeyOnly.FindStringSubmatch(strings.TrimSpace(stmt)); m != nil {
		return strings.ToLower(m[1])
	}
	return ""
}

// mismatchError says that a table of outboxgen's name is not outboxgen's.
type mismatchError struct{ msg string }

func (e mismatchError) Error() string { return e.msg }

// alterTarget is the table of an "ALTER TABLE name ..." statement.
func alterTarget(stmt string) string {
	f := strings.Fields(stmt)
	if len(f) >= 3 && strings.EqualFold(f[0], "ALTER") && strings.EqualFold(f[1], "TABLE") {
		return strings.Trim(f[2], "`")
	}
	return ""
}

// check compares a current table with the DDL. Every column must be present, of its type, and
// text must be utf8mb4. Byte comparison of identifiers follows from their VARBINARY type. Of a
// table that a newer outboxgen migrated, only the columns' presence is checked. An additive
// change may widen a type, say with an ENUM value this version never writes.
func (t schemaTable) check(st tableState) []string {
	var problems []string
	for _, c := range t.columns {
		have, ok := st.columns[c.name]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("table %s lacks column %s %s", t.name, c.name, c.typ))
		case st.version > SchemaVersion:
		case have.columnType != c.typ:
			what := have.columnType
			if have.collation != "" {
				what += " collate " + have.collation
			}
			problems = append(problems, fmt.Sprintf("column %s.%s is %s, want %s", t.name, c.name, what, c.typ))
		case have.charset != "" && have.charset != "utf8mb4":
			problems = append(problems, fmt.Sprintf("column %s.%s has character set %s, want utf8mb4", t.name, c.name, have.charset))
		case c.collation != "" && have.collation != c.collation:
			problems = append(problems, fmt.Sprintf("column %s.%s has collation %s, want %s (compared byte for byte)", t.name, c.name, have.collation, c.collation))
		}
	}
	return problems
}

var intWidth = regexp.MustCompile(`^(tinyint|smallint|mediumint|int|bigint)\([0-9]+\)`)

// normType makes a DDL type and information_schema's COLUMN_TYPE comparable. It lowercases and
// drops spaces and the integer display width, which MariaDB shows and MySQL does not.
func normType(s string) string {
	s = strings.ToLower(strings.Join(strings.Fields(s), ""))
	return intWidth.ReplaceAllString(s, "$1")
}

// schemaTable is one CREATE TABLE statement of Schema.
type schemaTable struct {
	name    string
	columns []schemaColumn // in DDL order
	ddl     string
}

type schemaColumn struct {
	name      string // lowercased
	typ       string // normType of the DDL type, without CHARACTER SET and COLLATE
	collation string // the DDL's COLLATE, lowercased, or "" when it names none
	since     int    // the schema version that added it, 1 for the first version's columns
}

var collateClause = regexp.MustCompile(`(?i)\s+(CHARACTER\s+SET\s+\S+|COLLATE\s+(\S+))`)

// columnSince records the columns added after version 1, so an upgrade does not refuse a table
// for lacking what it is about to add. Each later version's new columns go here.
var columnSince = map[string]int{
	"outbox_messages.headers":      3,
	"outbox_messages.ordering_key": 4,
	"outbox_messages.ordering_seq": 4,
	"outbox_messages.cancelled_at": 5,
	"outbox_inbox.expires_at":      6,
}

// columnDef splits a column line of schema.sql, a name, a type and the column's options.
var columnDef = regexp.MustCompile(`^\s*` + "`?" + `([A-Za-z_][A-Za-z0-9_]*)` + "`?" + `\s+(.+?)(\s+(NOT\s+NULL|NULL|DEFAULT|AUTO_INCREMENT)\b.*)?,?\s*$`)

// schemaTables reads the table names, columns and types from Schema's statements, so the checks
// cannot drift from the DDL. It relies on schema.sql's layout, one column or key per line.
// TestSchemaTablesMatchCreatedTables compares the result with the tables the DDL creates.
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
			if len(f) == 0 || strings.HasPrefix(f[0], ")") || notColumn[strings.ToUpper(f[0])] {
				continue
			}
			m := columnDef.FindStringSubmatch(line)
			if m == nil {
				return nil, fmt.Errorf("schema.sql: table %s: cannot read the column line %q", t.name, strings.TrimSpace(line))
			}
			name := strings.ToLower(m[1])
			since := columnSince[t.name+"."+name]
			if since == 0 {
				since = 1
			}
			c := schemaColumn{name: name, since: since}
			typ := strings.TrimSuffix(m[2], ",")
			for _, cl := range collateClause.FindAllStringSubmatch(typ, -1) {
				if cl[2] != "" {
					c.collation = strings.ToLower(cl[2])
				}
			}
			c.typ = normType(collateClause.ReplaceAllString(typ, ""))
			t.columns = append(t.columns, c)
		}
		out = append(out, t)
	}
	return out, nil
}
