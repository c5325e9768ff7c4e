package queries

import _ "embed"

//go:embed txprobe.sql
var txProbe string

// TxProbe returns the two statements of txprobe.sql: the savepoint and its release.
func TxProbe() (savepoint, release string) {
	s := Split(txProbe)
	return s[0], s[1]
}
