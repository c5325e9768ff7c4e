// Package queries holds the SQL of outboxgen: schema.sql (the one copy of the DDL) and the
// queries that sqlc compiles into runtime/internal/store.
package queries

import (
	_ "embed"
	"strings"
)

// Schema is the DDL of every outboxgen table: the one copy, which sqlc also reads (sqlc.yaml)
// and outbox.Migrate parses for the columns it checks. Each statement is idempotent
// (CREATE TABLE IF NOT EXISTS), so applying it twice is harmless.
//
//go:embed schema.sql
var Schema string

// Statements returns Schema split into single statements without comments, in order, for
// drivers that run one statement per call (go-sql-driver/mysql without multiStatements).
func Statements() []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(Schema, "\n") {
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
