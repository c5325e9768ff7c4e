// Command outboxgen generates typed Go code from events.yaml and operates the outbox table.
// Run `outboxgen help`; the logic lives in internal/cli so it is tested in-process.
package main

import (
	"os"

	"github.com/outboxgen/outboxgen/internal/cli"
)

func main() { os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr)) }
