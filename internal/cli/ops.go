package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/outboxgen/outboxgen/internal/termesc"
)

// The operator subcommands: status, retry, purge, show, migrate, one file each (status.go,
// retry.go, purge.go, show.go, migrate.go). They run the runtime's own calls (outbox.Stats,
// ListFailed, Retry, Purge, Inspect, Migrate) and have no SQL of their own, so the CLI and an
// application's dashboard always agree. This file holds what they share: exit codes, opsCmd
// (flags, usage, error lines, the password rule). The connection is in ops_db.go, the DSN in
// ops_dsn.go, printing text from outside in ops_text.go, the shared flag values in
// ops_flags.go and ops_duration.go. The generator's subcommands and the dispatcher live in
// cli.go.

// Exit codes of the operator subcommands. 1 is reserved for `status --check` so that a probe
// can tell "the outbox needs a person" from "the probe itself could not run" (2 and 3).
const (
	opsExitOK    = 0
	opsExitCheck = 1 // status --check: stuck rows, or rows FAILED within the window
	opsExitUsage = 2 // bad flags or arguments, no or malformed DSN
	opsExitDB    = 3 // database unreachable or a runtime call failed
	// opsExitInterrupted: SIGINT or SIGTERM stopped the command (128 + SIGINT, as shells report
	// it), so an operator's Ctrl-C is not mistaken for a database failure.
	opsExitInterrupted = 130
)

// lastErrorWidth truncates last_error in status and retry listings: enough to recognise the
// error; `outboxgen retry --dry-run --id N` shows the same, the table holds the whole text.
const lastErrorWidth = 160

// maxExplained caps how many unmatched ids are explained one by one.
const maxExplained = 20

// maxOpsIDs caps --id: the runtime's calls take a list of ids as one statement's arguments.
const maxOpsIDs = 10000

const dsnHelp = `
The database comes from --dsn or, when that is empty, $OUTBOX_DSN (keeps the password out of
the process list), in go-sql-driver/mysql form: user:password@tcp(host:3306)/dbname.
parseTime=true and loc=UTC are always set (the runtime reads times as UTC). The DSN's timeout
(10s when it sets none) bounds the whole connect. The password is never printed.

Exit codes: 0 ok, 1 status --check found a problem, 2 usage, 3 database unreachable or failing,
130 interrupted (Ctrl-C or SIGTERM; what was done before is reported).
`

// opsCmd is one operator subcommand invocation: its flags, output streams and database.
//
// The password rule: nothing the command prints may contain the DSN's password. The command's
// own wording is fixed text and cannot; everything that comes from outside (driver and server
// errors, driver logs, echoed flag values, last_error and event types read from the table)
// passes through c.clean first. Scrubbing whole lines instead would mangle a password that
// is an ordinary word ("outbox" would turn "outboxgen" into "*****gen").
//
// The terminal rule: text from outside is printed inert. On a terminal it goes through c.line
// or c.text (masked, then its control characters escaped: termesc); in JSON output, strings
// that may not be UTF-8 go through outboxlabel.Escape so that distinct values stay distinct, and the
// document through termesc.JSON.
type opsCmd struct {
	name    string
	help    string
	fs      *flag.FlagSet
	dsnArg  string
	out     io.Writer
	errw    io.Writer
	secrets []string
	dsn     opsDSN
	getenv  func(string) string
	log     driverLog
	// ctx is the command's context once it connects: cancelled by SIGINT/SIGTERM.
	ctx context.Context
}

func newOpsCmd(name, help string, stdout, stderr io.Writer) *opsCmd {
	c := &opsCmd{
		name: name, help: help,
		fs:     flag.NewFlagSet("outboxgen "+name, flag.ContinueOnError),
		out:    stdout,
		errw:   stderr,
		getenv: os.Getenv,
	}
	c.fs.StringVar(&c.dsnArg, "dsn", "", "database DSN (default $"+envDSN+")")
	return c
}

// parse parses args; ok=false means the command is over with the returned exit code.
func (c *opsCmd) parse(args []string) (code int, ok bool) {
	var flagErr bytes.Buffer
	c.fs.SetOutput(&flagErr)
	c.fs.Usage = func() {} // printed below, after the error line is cleaned
	// The flag package echoes bad values; clean them with whatever password the DSN carries,
	// even before knowing whether the DSN parses, and even when the bad flag comes before
	// --dsn (parsing stops there, so the DSN is looked for in args by hand first).
	for _, dsnRaw := range append(dsnArgs(args), c.getenv(envDSN)) {
		c.secrets = append(c.secrets, passwordForms(rawPassword(dsnRaw))...)
	}
	err := c.fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		c.printUsage(c.out)
		return opsExitOK, false
	}
	if err != nil {
		// One line: the usage below it would push the error off a small screen.
		msg := strings.TrimSpace(strings.SplitN(flagErr.String(), "\n", 2)[0])
		fmt.Fprintf(c.errw, "outboxgen %s: %s (see outboxgen %s -h)\n", c.name, termesc.Line(scrubAll(msg, c.secrets)), c.name)
		return opsExitUsage, false
	}
	if c.fs.NArg() > 0 {
		// "outboxgen retry 6": say how to give an id. Only digits are echoed.
		if first := c.fs.Arg(0); c.fs.Lookup("id") != nil && isID(first) {
			return c.usageErr("give ids with --id: outboxgen %s --id %s", c.name, first), false
		}
		// Not echoed: a DSN pasted as an argument would print its password.
		return c.usageErr("%s takes no arguments (got %d); the database goes in --dsn or $%s", c.name, c.fs.NArg(), envDSN), false
	}
	return opsExitOK, true
}

// isID says s is a message id: a positive decimal integer.
func isID(s string) bool {
	n, err := strconv.ParseInt(s, 10, 64)
	return err == nil && n > 0
}

// dsnArgs returns every value args give to -dsn or --dsn, in either form (--dsn X, --dsn=X).
func dsnArgs(args []string) []string {
	var out []string
	for i, a := range args {
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "dsn" {
			continue
		}
		if hasValue {
			out = append(out, value)
		} else if i+1 < len(args) {
			out = append(out, args[i+1])
		}
	}
	return out
}

// printUsage writes the command's help, its flags and the DSN help to w.
func (c *opsCmd) printUsage(w io.Writer) {
	var b bytes.Buffer
	b.WriteString(c.help)
	b.WriteString("\nflags:\n")
	c.fs.SetOutput(&b)
	c.fs.PrintDefaults()
	b.WriteString(dsnHelp)
	w.Write(b.Bytes())
}

// usageErr prints one line and "see --help", and returns opsExitUsage. String and error
// arguments (flag values, DSN errors) are masked everywhere they hold the password, not only
// where it stands alone: they name no identifiers that masking could spoil.
func (c *opsCmd) usageErr(format string, args ...any) int {
	for i, a := range args {
		switch v := a.(type) {
		case string:
			args[i] = scrubAll(v, c.secrets)
		case error:
			args[i] = scrubAll(v.Error(), c.secrets)
		}
	}
	fmt.Fprintf(c.errw, "outboxgen %s: %s (see outboxgen %s -h)\n", c.name, termesc.Line(fmt.Sprintf(format, args...)), c.name)
	return opsExitUsage
}

// dbErr prints one line naming the database (without password) and returns opsExitDB. Errors
// can be multi-line (a handler's or the driver's); the first line is the cause.
func (c *opsCmd) dbErr(what string, err error) int {
	if c.ctx != nil && c.ctx.Err() != nil {
		fmt.Fprintf(c.errw, "outboxgen %s: interrupted during %s\n", c.name, what)
		return opsExitInterrupted
	}
	msg := err.Error()
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = strings.TrimSpace(msg[:i])
	}
	if logged := c.log.take(); len(logged) > 0 {
		msg += " (driver: " + strings.Join(logged, "; ") + ")"
	}
	fmt.Fprintf(c.errw, "outboxgen %s: %s (database %s): %s\n", c.name, what, c.line(c.dsn.shown), c.line(msg))
	return opsExitDB
}
