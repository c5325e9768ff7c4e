package cli

import (
	"fmt"
	"io"
)

// The operator subcommands (status, retry, purge, migrate) live in this file; the generator's
// subcommands and the dispatcher live in cli.go. These stubs are replaced by the operations work.

func runStatus(args []string, stdout, stderr io.Writer) int  { return notYet("status", stderr) }
func runRetry(args []string, stdout, stderr io.Writer) int   { return notYet("retry", stderr) }
func runPurge(args []string, stdout, stderr io.Writer) int   { return notYet("purge", stderr) }
func runMigrate(args []string, stdout, stderr io.Writer) int { return notYet("migrate", stderr) }

func notYet(cmd string, stderr io.Writer) int {
	fmt.Fprintf(stderr, "outboxgen %s: not implemented yet\n", cmd)
	return 2
}
