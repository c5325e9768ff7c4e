// Package queries holds the SQL of outboxgen: schema.sql (the one copy of the DDL) and the
// queries that sqlc compiles into runtime/internal/store.
package queries

import (
	"embed"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
)

// Schema is the DDL of every outboxgen table: the one copy, which sqlc also reads (sqlc.yaml)
// and outbox.Migrate parses for the columns it checks. Each statement is idempotent
// (CREATE TABLE IF NOT EXISTS), so applying it twice is harmless.
//
//go:embed schema.sql
var Schema string

// SchemaVersion is the version of Schema. Each table's COMMENT records the version it is at
// ('outboxgen schema N'); tables of version 1 predate the comment. A version whose change an
// older worker can live with (a new column, an ENUM value it never writes) also names the
// oldest version that may run on the tables, 'outboxgen schema N min M'; without min, M = N.
// Every outboxgen before the min existed reads any other COMMENT as version 1, so a version
// that is not additive writes no min.
const SchemaVersion = 6

//go:embed upgrades/*.sql
var upgrades embed.FS

// Upgrade is one file of upgrades/: the statements that bring tables from Version-1 to Version,
// one ALTER TABLE per table.
type Upgrade struct {
	Version    int
	Statements []string
}

// Upgrades returns every upgrade in version order. Files are named NNN_what.sql, NNN being the
// version they bring the tables to.
func Upgrades() ([]Upgrade, error) {
	names, err := fs.Glob(upgrades, "upgrades/*.sql")
	if err != nil {
		return nil, err
	}
	var out []Upgrade
	for _, name := range names { // fs.Glob returns names sorted
		base := strings.TrimPrefix(name, "upgrades/")
		n, err := strconv.Atoi(strings.SplitN(base, "_", 2)[0])
		if err != nil || n < 2 || n > SchemaVersion {
			return nil, fmt.Errorf("queries: %s: the name must start with a version in 2..%d", name, SchemaVersion)
		}
		b, err := upgrades.ReadFile(name)
		if err != nil {
			return nil, err
		}
		out = append(out, Upgrade{Version: n, Statements: Split(string(b))})
	}
	return out, nil
}

// Statements returns Schema split into single statements without comments, in order, for
// drivers that run one statement per call (go-sql-driver/mysql without multiStatements).
func Statements() []string { return Split(Schema) }

// Split splits SQL text into statements without comments (one statement ends at a line ending in ;).
func Split(sql string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(sql, "\n") {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "--") {
			continue
		}
		cur.WriteString(line)
		cur.WriteString("\n")
		if strings.HasSuffix(trimmed, ";") {
			out = append(out, strings.TrimSuffix(strings.TrimSpace(cur.String()), ";"))
			cur.Reset()
		}
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		out = append(out, s)
	}
	return out
}
