// outboxgen pause and resume: stop every worker on the table from claiming an event type, and
// let them claim it again (outbox.Pause, outbox.Resume).

package cli

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/outboxgen/outboxgen/internal/termesc"
	"github.com/outboxgen/outboxgen/runtime/outbox"
)

const pauseHelp = `usage: outboxgen pause TYPE... [--for D] [--reason TEXT] [--dsn DSN]

Stops every worker on the table from claiming messages of each event type TYPE (the wire
name), fleet-wide, within about a second (outbox.Pause). Messages already claimed finish; new
ones wait PENDING. A type with no messages yet can be paused. --for ends the pause by itself
after D (Go syntax plus days: 15m, 2h, 1d), on the database clock; without it the pause lasts
until outboxgen resume. --reason is shown to other operators by status. Pausing a paused type
replaces its end and reason. Types and flags come in any order.
`

const resumeHelp = `usage: outboxgen resume TYPE... [--dsn DSN]

Ends the pause of each event type TYPE (outbox.Resume): workers claim it again within about a
second. Resuming a type that is not paused does nothing. Types and flags come in any order.
`

func runPause(args []string, stdout, stderr io.Writer) int {
	c := newOpsCmd("pause", pauseHelp, stdout, stderr)
	var forD durationFlag
	c.fs.Var(&forD, "for", "end the pause by itself after this long (Go syntax or days: 15m, 1d)")
	reason := c.fs.String("reason", "", "why, shown to other operators")
	types, code, ok := c.parseTypes(args)
	if !ok {
		return code
	}
	if forD.set && forD.d <= 0 {
		return c.usageErr("--for must be positive, got %s", forD.String())
	}
	ctx, stop := opsContext()
	defer stop()
	db, code, ok := c.open(ctx)
	if !ok {
		return code
	}
	for _, t := range types {
		if err := outbox.Pause(ctx, db, t, outbox.PauseOptions{For: forD.d, Reason: *reason}); err != nil {
			return c.closeDB(db, c.dbErr("pause", err))
		}
		until := "until outboxgen resume"
		if forD.set {
			until = "for " + formatAge(forD.d)
		}
		fmt.Fprintf(c.out, "paused %s %s: workers stop claiming it within a second\n", c.line(t), until)
	}
	return c.closeDB(db, opsExitOK)
}

func runResume(args []string, stdout, stderr io.Writer) int {
	c := newOpsCmd("resume", resumeHelp, stdout, stderr)
	types, code, ok := c.parseTypes(args)
	if !ok {
		return code
	}
	ctx, stop := opsContext()
	defer stop()
	db, code, ok := c.open(ctx)
	if !ok {
		return code
	}
	paused, err := outbox.Pauses(ctx, db)
	if err != nil {
		return c.closeDB(db, c.dbErr("read pauses", err))
	}
	was := map[string]bool{}
	for _, p := range paused {
		was[p.EventType] = true
	}
	for _, t := range types {
		if err := outbox.Resume(ctx, db, t); err != nil {
			return c.closeDB(db, c.dbErr("resume", err))
		}
		if was[t] {
			fmt.Fprintf(c.out, "resumed %s: workers claim it again within a second\n", c.line(t))
		} else {
			fmt.Fprintf(c.out, "%s was not paused\n", c.line(t))
		}
	}
	return c.closeDB(db, opsExitOK)
}

// parseTypes parses flags and event types in any order. Everything after -- is a type, so a
// type that starts with a dash can be given. At least one type is required, each of 1 to 191
// bytes of UTF-8.
func (c *opsCmd) parseTypes(args []string) (types []string, code int, ok bool) {
	var flagErr bytes.Buffer
	c.fs.SetOutput(&flagErr)
	c.fs.Usage = func() {}
	for _, dsnRaw := range append(dsnArgs(args), c.getenv(envDSN)) {
		c.secrets = append(c.secrets, passwordForms(rawPassword(dsnRaw))...)
	}
	for {
		err := c.fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			c.printUsage(c.out)
			return nil, opsExitOK, false
		}
		if err != nil {
			msg := strings.TrimSpace(strings.SplitN(flagErr.String(), "\n", 2)[0])
			fmt.Fprintf(c.errw, "outboxgen %s: %s (see outboxgen %s -h)\n", c.name, termesc.Line(scrubAll(msg, c.secrets)), c.name)
			return nil, opsExitUsage, false
		}
		rest := c.fs.Args()
		if len(rest) == 0 {
			break
		}
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			types = append(types, rest...)
			break
		}
		types = append(types, rest[0])
		args = rest[1:]
	}
	if len(types) == 0 {
		return nil, c.usageErr("name at least one event type (the wire name from events.yaml)"), false
	}
	for _, t := range types {
		if err := checkTypeArg(t); err != nil {
			return nil, c.usageErr("%v", err), false
		}
	}
	return types, opsExitOK, true
}

// checkTypeArg refuses what no event type can be, before connecting.
func checkTypeArg(t string) error {
	if t == "" || len(t) > 191 || !utf8.ValidString(t) {
		return fmt.Errorf("event type %q: want 1 to 191 bytes of UTF-8", t)
	}
	return nil
}
