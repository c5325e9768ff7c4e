package cli

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/go-sql-driver/mysql"

	"github.com/outboxgen/outboxgen/internal/termesc"
	"github.com/outboxgen/outboxgen/internal/utf8esc"
	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// The operator subcommands: status, retry, purge, show, migrate, one file each (status.go,
// retry.go, purge.go, show.go, migrate.go). They run the runtime's own calls (outbox.Stats,
// ListFailed, Retry, Purge, Inspect, Migrate) and have no SQL of their own, so the CLI and an
// application's dashboard always agree. This file holds what they share: exit codes, opsCmd
// (flags, DSN, connection, error lines, the password rule) and the flag values and helpers of
// more than one command. The generator's subcommands and the dispatcher live in cli.go.

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
// that may not be UTF-8 go through utf8esc so that distinct values stay distinct, and the
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

func (c *opsCmd) printUsage(w io.Writer) {
	var b bytes.Buffer
	b.WriteString(c.help)
	b.WriteString("\nflags:\n")
	c.fs.SetOutput(&b)
	c.fs.PrintDefaults()
	b.WriteString(dsnHelp)
	w.Write(b.Bytes())
}

// clean removes every form of the DSN's password from text that came from outside.
func (c *opsCmd) clean(s string) string { return scrub(s, c.secrets) }

// line is text from outside made fit for a terminal, as one line or table cell: masked, then
// every control character escaped.
func (c *opsCmd) line(s string) string { return termesc.Line(c.clean(s)) }

// text is text from outside made fit for a terminal, as lines of its own (a stack trace, a
// payload): masked, then every control character but newline and tab escaped.
func (c *opsCmd) text(s string) string { return termesc.Text(c.clean(s)) }

// cell is a long text from outside (a last_error) for one table cell: masked, cut to width
// characters (after masking, so that no part of a password survives the cut, and after
// writing bytes that are not UTF-8 as \xNN, which the cut would turn into U+FFFD), on one line
// and escaped.
func (c *opsCmd) cell(s string, width int) string {
	return termesc.Line(opsOneLine(opsTruncate(utf8esc.Escape(c.clean(s)), width)))
}

// jsonString is text from the database as a JSON string: masked, and its bytes that are not UTF-8
// written as \xNN (utf8esc), which encoding/json would turn into U+FFFD, so that two event
// types that differ only there stay two keys.
func (c *opsCmd) jsonString(s string) string { return utf8esc.Escape(c.clean(s)) }

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

// open resolves the DSN and connects. The pool is small: each command runs a few statements.
func (c *opsCmd) open(ctx context.Context) (*sql.DB, int, bool) {
	c.ctx = ctx
	d, err := resolveDSN(c.dsnArg, c.getenv)
	if err != nil {
		return nil, c.usageErr("%v", err), false
	}
	c.dsn = d
	c.secrets = append(c.secrets, d.secrets...)
	d.cfg.Logger = &c.log
	connector, err := mysql.NewConnector(d.cfg)
	if err != nil {
		return nil, c.usageErr("invalid DSN: %v", err), false
	}
	db := sql.OpenDB(connector)
	db.SetMaxOpenConns(4)
	// The DSN's timeout bounds the whole connect, handshake included: a host that accepts the
	// TCP connection and then says nothing must not hang the command.
	pingCtx, cancel := context.WithTimeout(ctx, d.cfg.Timeout)
	defer cancel()
	if err := db.PingContext(pingCtx); err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			err = fmt.Errorf("no answer within %s (the DSN's timeout)", d.cfg.Timeout)
		}
		if cerr := db.Close(); cerr != nil {
			err = fmt.Errorf("%w; closing the pool: %v", err, cerr)
		}
		return nil, c.dbErr("cannot connect", err), false
	}
	return db, opsExitOK, true
}

// closeDB closes the pool; an error there is reported, and turns a success into exit 3.
func (c *opsCmd) closeDB(db *sql.DB, code int) int {
	for _, m := range c.log.take() {
		fmt.Fprintf(c.errw, "outboxgen %s: mysql driver: %s\n", c.name, c.line(m))
	}
	if err := db.Close(); err != nil {
		fmt.Fprintf(c.errw, "outboxgen %s: closing the database: %s\n", c.name, c.line(err.Error()))
		if code == opsExitOK {
			return opsExitDB
		}
	}
	return code
}

// opsContext is cancelled by SIGINT/SIGTERM, so a long purge stops between batches.
func opsContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// ---- flag values and helpers ----

// durationFlag is a flag.Value in parseDurationDays's syntax (Go plus days).
type durationFlag struct {
	d   time.Duration
	set bool
}

func (f *durationFlag) String() string {
	if f == nil {
		return ""
	}
	return formatAge(f.d)
}

func (f *durationFlag) Set(s string) error {
	d, err := parseDurationDays(s)
	if err != nil {
		return err
	}
	f.d, f.set = d, true
	return nil
}

// idsFlag is the repeatable --id.
type idsFlag []outbox.MessageID

func (f *idsFlag) String() string {
	parts := make([]string, len(*f))
	for i, id := range *f {
		parts[i] = strconv.FormatInt(int64(id), 10)
	}
	return strings.Join(parts, ",")
}

func (f *idsFlag) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return fmt.Errorf("want a positive message id, got %q", s)
	}
	for _, id := range *f {
		if id == outbox.MessageID(n) {
			return nil // given twice: one message, so the "did not match" count stays true
		}
	}
	*f = append(*f, outbox.MessageID(n))
	return nil
}

// driverLog collects what go-sql-driver/mysql logs (to os.Stderr by default), which is often
// the real cause behind its "invalid connection" error: a failing command prints it on its one
// error line, a successful one as lines of their own. Either way cleaned of the password.
type driverLog struct {
	mu   sync.Mutex
	msgs []string
}

// Print implements mysql.Logger.
func (l *driverLog) Print(v ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs = append(l.msgs, opsOneLine(fmt.Sprint(v...)))
}

func (l *driverLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.msgs
	l.msgs = nil
	return m
}

// formatTime prints a database time; "-" for one that is not set (a row made FAILED by hand
// without failed_at).
func formatTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func opsTruncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}

func opsOneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
