// Package entdb is a minimal ent client, generated with the sql/execquery feature, that gives
// its transactions ExecContext and QueryContext.
package entdb

//go:generate go run -mod=mod entgo.io/ent/cmd/ent generate --feature sql/execquery ./schema
