package cli

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/go-sql-driver/mysql"

	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// The operator subcommands: status, retry, purge, migrate. They run the runtime's own calls
// (outbox.Stats, ListFailed, Retry, Purge, Migrate) and have no SQL of their own, so the CLI and
// an application's dashboard always agree. The generator's subcommands and the dispatcher live
// in cli.go.

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

const dsnHelp = `
The database comes from --dsn or, when that is empty, $OUTBOX_DSN (keeps the password out of
the process list), in go-sql-driver/mysql form: user:password@tcp(host:3306)/dbname.
parseTime=true and loc=UTC are always set (the runtime reads times as UTC). The DSN's timeout
(10s when it sets none) bounds the whole connect. The password is never printed.

Exit codes: 0 ok, 1 status --check found a problem, 2 usage, 3 database unreachable or failing,
130 interrupted (Ctrl-C or SIGTERM; what was done before is reported).
`

const statusHelp = `usage: outboxgen status [--json] [--check] [--window 1h] [--max-due-age 10m] [--failed 10] [--dsn DSN]

Prints the outbox's state from the database (outbox.Stats): by event type the PENDING, due,
PROCESSING, stale, stuck and FAILED counts (never SENT: that part of the table grows without
bound), the oldest pending message's age, and the newest FAILED messages with their last_error.

  due      PENDING and next_attempt_at has passed: waiting only for a worker
  stale    PROCESSING past its lease (reclaim_after): its worker died or hung; a live worker
           will reclaim it
  stuck    PROCESSING past 3x its lease: nobody is reclaiming; no worker is alive for it
  oldest pending   the oldest PENDING message's age, delayed and backed-off ones included
  oldest due       how long the longest-waiting due message has been claimable: near the
                   workers' poll interval while they run; it grows when nobody claims

--check exits 1 when stuck > 0, when a due message has waited longer than --max-due-age (no
worker is claiming: every worker is down, or none handles that event type), or when any message
FAILED within --window, so a cron job or probe alerts on an outage and on new failures without
staying red forever over old ones.
`

const retryHelp = `usage: outboxgen retry (--id N ... | --event-type T | --failed-since D | --all) [--dry-run] [--dsn DSN]

Moves FAILED messages back to PENDING, due now, with attempts reset to 0 (outbox.Retry).
The selectors combine (AND); at least one is required; --all selects every FAILED message.
Prints the count, and names the given ids that did not match and why; with --dry-run it lists
the messages that would move (the first 100; the count is exact) and changes nothing.

--failed-since takes a duration ago in Go syntax plus days (30m, 36h, 7d, 1d12h), measured on
this machine's clock, or an RFC 3339 time (2026-12-01T00:00:00Z). A message made FAILED by hand
without failed_at matches only --id, --event-type and --all.
`

const purgeHelp = `usage: outboxgen purge (--older-than D | --id N ...) [--status sent|failed] [--batch-size N] [--dry-run] [--dsn DSN]

Deletes SENT messages (default) whose sent_at, or FAILED messages whose failed_at, is older than
D (Go syntax plus days: 7d, 36h, 1d12h), in small batches so that no statement holds many row
locks for long (outbox.Purge). Ages are measured on the database clock. A row made FAILED by
hand while it was due in the future is purged once that due time is older than D, too; one
without failed_at counts as failed at its due time.

--id deletes exactly the given messages, whatever their age, if they have --status (which must
then be given): how to discard a FAILED message that must never be delivered (read it first
with outboxgen show --id N). Messages of another status are left alone and named.

Prints the count; with --dry-run, the count it would delete, deleting nothing.
`

const showHelp = `usage: outboxgen show --id N [--json] [--dsn DSN]

Prints one message, whatever its state, with every column (outbox.Inspect): its whole
last_error (a panic's full stack; status and retry cut it at 160 characters) and its payload.
Read it before retrying or discarding a message. Exits 1 when no message has that id.
`

const migrateHelp = `usage: outboxgen migrate [--dsn DSN]

Applies the outbox schema (outbox.Migrate): creates the tables that are missing and leaves the
others as they are, so running it twice is harmless, and it needs the CREATE privilege only
while a table is missing. It fails, naming the table and its missing columns, when an existing
table does not match the schema. It also checks the connection settings the runtime needs.
`

// opsCmd is one operator subcommand invocation: its flags, output streams and database.
//
// The password rule: nothing the command prints may contain the DSN's password. The command's
// own wording is fixed text and cannot; everything that comes from outside (driver and server
// errors, driver logs, echoed flag values, last_error and event types read from the table)
// passes through c.clean first. Scrubbing whole lines instead would mangle a password that
// is an ordinary word ("outbox" would turn "outboxgen" into "*****gen").
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
		fmt.Fprintf(c.errw, "outboxgen %s: %s (see outboxgen %s -h)\n", c.name, scrubAll(msg, c.secrets), c.name)
		return opsExitUsage, false
	}
	if c.fs.NArg() > 0 {
		// Not echoed: a DSN pasted as an argument would print its password.
		return c.usageErr("%s takes no arguments (got %d); the database goes in --dsn or $%s", c.name, c.fs.NArg(), envDSN), false
	}
	return opsExitOK, true
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
	fmt.Fprintf(c.errw, "outboxgen %s: %s (see outboxgen %s -h)\n", c.name, fmt.Sprintf(format, args...), c.name)
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
	fmt.Fprintf(c.errw, "outboxgen %s: %s (database %s): %s\n", c.name, what, c.clean(c.dsn.shown), c.clean(msg))
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
		fmt.Fprintf(c.errw, "outboxgen %s: mysql driver: %s\n", c.name, c.clean(m))
	}
	if err := db.Close(); err != nil {
		fmt.Fprintf(c.errw, "outboxgen %s: closing the database: %s\n", c.name, c.clean(err.Error()))
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

// ---- status ----

func runStatus(args []string, stdout, stderr io.Writer) int {
	c := newOpsCmd("status", statusHelp, stdout, stderr)
	asJSON := c.fs.Bool("json", false, "print JSON (the shape is documented in docs/operations.md)")
	check := c.fs.Bool("check", false, "exit 1 when stuck > 0 or messages FAILED within --window")
	window := durationFlag{d: time.Hour}
	c.fs.Var(&window, "window", "how far back a FAILED message fails --check (Go syntax or days)")
	maxDue := durationFlag{d: 10 * time.Minute}
	c.fs.Var(&maxDue, "max-due-age", "a due message waiting longer than this fails --check (0: never)")
	nFailed := c.fs.Int("failed", 10, "how many of the newest FAILED messages to list (0: none)")
	if code, ok := c.parse(args); !ok {
		return code
	}
	if window.d <= 0 {
		return c.usageErr("--window must be positive, got %s", window.String())
	}
	if maxDue.d < 0 {
		return c.usageErr("--max-due-age must not be negative, got %s", maxDue.String())
	}
	if *nFailed < 0 {
		return c.usageErr("--failed must be >= 0, got %d", *nFailed)
	}
	ctx, stop := opsContext()
	defer stop()
	db, code, ok := c.open(ctx)
	if !ok {
		return code
	}
	return c.closeDB(db, c.status(ctx, db, *asJSON, *check, statusLimits{window: window.d, maxDue: maxDue.d}, *nFailed))
}

// statusReport is the JSON shape of `outboxgen status --json`, documented in docs/operations.md.
type statusReport struct {
	Pending              int64                 `json:"pending"`
	Due                  int64                 `json:"due"`
	Processing           int64                 `json:"processing"`
	Stale                int64                 `json:"stale"`
	Stuck                int64                 `json:"stuck"`
	Failed               int64                 `json:"failed"`
	OldestPendingSeconds float64               `json:"oldest_pending_seconds"`
	OldestDueSeconds     float64               `json:"oldest_due_seconds"`
	ByType               map[string]typeReport `json:"by_type"`
	NewestFailed         []failedReport        `json:"newest_failed"`
	Check                checkReport           `json:"check"`
}

type typeReport struct {
	Pending    int64 `json:"pending"`
	Due        int64 `json:"due"`
	Processing int64 `json:"processing"`
	Stale      int64 `json:"stale"`
	Stuck      int64 `json:"stuck"`
	Failed     int64 `json:"failed"`
	// OldestPendingSeconds is this type's oldest PENDING row's age; 0 when none.
	OldestPendingSeconds float64 `json:"oldest_pending_seconds"`
	// OldestDueSeconds is how long this type's longest-waiting due row has been due; 0 when none.
	OldestDueSeconds float64 `json:"oldest_due_seconds"`
}

type failedReport struct {
	ID          int64     `json:"id"`
	EventType   string    `json:"event_type"`
	Attempts    int       `json:"attempts"`
	MaxAttempts int       `json:"max_attempts"`
	FailedAt    time.Time `json:"failed_at"`
	LastError   string    `json:"last_error"`
}

type checkReport struct {
	OK               bool     `json:"ok"`
	WindowSeconds    float64  `json:"window_seconds"`
	MaxDueAgeSeconds float64  `json:"max_due_age_seconds"`
	FailedInWindow   int64    `json:"failed_in_window"`
	Problems         []string `json:"problems"`
}

// statusLimits are what --check holds the outbox to.
type statusLimits struct {
	window time.Duration // a FAILED message within it fails the check
	maxDue time.Duration // a due message waiting longer fails the check; 0: never
}

func (c *opsCmd) status(ctx context.Context, db *sql.DB, asJSON, check bool, lim statusLimits, nFailed int) int {
	window := lim.window
	snap, err := outbox.Stats(ctx, db)
	if err != nil {
		return c.dbErr("stats", err)
	}
	rep := statusReport{
		Pending: snap.Pending, Due: snap.Due, Processing: snap.Processing,
		Stale: snap.Stale, Stuck: snap.Stuck, Failed: snap.Failed,
		OldestPendingSeconds: snap.OldestPending.Seconds(),
		OldestDueSeconds:     snap.OldestDue.Seconds(),
		ByType:               map[string]typeReport{},
		NewestFailed:         []failedReport{},
		Check:                checkReport{WindowSeconds: window.Seconds(), MaxDueAgeSeconds: lim.maxDue.Seconds(), Problems: []string{}},
	}
	for t, tc := range snap.ByType {
		rep.ByType[c.clean(t)] = typeReport{Pending: tc.Pending, Due: tc.Due, Processing: tc.Processing,
			Stale: tc.Stale, Stuck: tc.Stuck, Failed: tc.Failed, OldestPendingSeconds: tc.OldestPending.Seconds(),
			OldestDueSeconds: tc.OldestDue.Seconds()}
	}
	if nFailed > 0 && snap.Failed > 0 {
		failed, err := newestFailed(ctx, db, nFailed)
		if err != nil {
			return c.dbErr("list failed", err)
		}
		for _, f := range failed {
			rep.NewestFailed = append(rep.NewestFailed, failedReport{
				ID: int64(f.ID), EventType: c.clean(f.EventType), Attempts: f.Attempts, MaxAttempts: f.MaxAttempts,
				FailedAt: f.FailedAt, LastError: opsTruncate(c.clean(f.LastError), lastErrorWidth),
			})
		}
	}
	// The window is measured on this machine's clock against failed_at from the database
	// clock; skew of a few seconds does not matter at the scale of a window.
	if snap.Failed > 0 {
		recent, err := countFailed(ctx, db, outbox.Filter{FailedSince: time.Now().Add(-window)})
		if err != nil {
			return c.dbErr("count recent failures", err)
		}
		rep.Check.FailedInWindow = recent
	}
	if rep.Stuck > 0 {
		rep.Check.Problems = append(rep.Check.Problems,
			fmt.Sprintf("%d message(s) stuck PROCESSING past 3x their lease: nobody is reclaiming", rep.Stuck))
	}
	if lim.maxDue > 0 && snap.OldestDue > lim.maxDue {
		// Claims go oldest first, so a live fleet behind a big backlog also shows a long wait;
		// rows PROCESSING within their lease tell "behind" from "nobody claims".
		var idle, behind []string
		for t, tc := range rep.ByType {
			if tc.OldestDueSeconds > lim.maxDue.Seconds() {
				if tc.Processing > tc.Stale {
					behind = append(behind, t)
				} else {
					idle = append(idle, t)
				}
			}
		}
		sort.Strings(idle)
		sort.Strings(behind)
		if len(idle) > 0 {
			rep.Check.Problems = append(rep.Check.Problems,
				fmt.Sprintf("due messages have waited more than %s and nobody claims them: are the workers for %s running?",
					formatAge(lim.maxDue), strings.Join(idle, ", ")))
		}
		if len(behind) > 0 {
			rep.Check.Problems = append(rep.Check.Problems,
				fmt.Sprintf("due messages have waited more than %s: the workers for %s are claiming but behind",
					formatAge(lim.maxDue), strings.Join(behind, ", ")))
		}
	}
	if rep.Check.FailedInWindow > 0 {
		rep.Check.Problems = append(rep.Check.Problems,
			fmt.Sprintf("%d message(s) FAILED within the last %s", rep.Check.FailedInWindow, formatAge(window)))
	}
	rep.Check.OK = len(rep.Check.Problems) == 0

	if asJSON {
		enc := json.NewEncoder(c.out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			fmt.Fprintf(c.errw, "outboxgen status: writing JSON: %s\n", c.clean(err.Error()))
			return opsExitDB
		}
	} else {
		c.printStatus(rep, window)
	}
	if check && !rep.Check.OK {
		return opsExitCheck
	}
	return opsExitOK
}

func (c *opsCmd) printStatus(rep statusReport, window time.Duration) {
	// Built whole, then written once.
	var b bytes.Buffer
	defer func() { c.out.Write(b.Bytes()) }() // one write: a reader never sees half a table
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "EVENT TYPE\tPENDING\tDUE\tPROCESSING\tSTALE\tSTUCK\tFAILED\tOLDEST PENDING\tOLDEST DUE")
	types := make([]string, 0, len(rep.ByType))
	for t := range rep.ByType {
		types = append(types, t)
	}
	sort.Strings(types)
	for _, t := range types {
		tc := rep.ByType[t]
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\n", t, tc.Pending, tc.Due, tc.Processing, tc.Stale, tc.Stuck, tc.Failed,
			pendingAge(tc.Pending, tc.OldestPendingSeconds), pendingAge(tc.Due, tc.OldestDueSeconds))
	}
	fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\n", "total", rep.Pending, rep.Due, rep.Processing, rep.Stale, rep.Stuck, rep.Failed,
		pendingAge(rep.Pending, rep.OldestPendingSeconds), pendingAge(rep.Due, rep.OldestDueSeconds))
	w.Flush()

	fmt.Fprintln(&b)
	fmt.Fprintf(&b, "%-17s%s (delivery lag, delayed and backed-off messages included)\n", "oldest pending:", pendingAge(rep.Pending, rep.OldestPendingSeconds))
	fmt.Fprintf(&b, "%-17s%s (how long a due message has waited for a worker)\n", "oldest due:", pendingAge(rep.Due, rep.OldestDueSeconds))
	fmt.Fprintf(&b, "%-17s%d (PROCESSING past their lease; a live worker reclaims them)\n", "stale:", rep.Stale)
	if rep.Stuck > 0 {
		fmt.Fprintf(&b, "%-17s%d (PROCESSING past 3x their lease: NOBODY IS RECLAIMING)\n", "stuck:", rep.Stuck)
	} else {
		fmt.Fprintf(&b, "%-17s0\n", "stuck:")
	}
	fmt.Fprintf(&b, "%-17s%d\n", "failed in "+formatAge(window)+":", rep.Check.FailedInWindow)

	if len(rep.NewestFailed) > 0 {
		fmt.Fprintf(&b, "\nnewest FAILED (%d of %d; retry with `outboxgen retry --id N`):\n", len(rep.NewestFailed), rep.Failed)
		w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(w, "  ID\tEVENT TYPE\tATTEMPTS\tFAILED AT\tLAST ERROR")
		for _, f := range rep.NewestFailed {
			fmt.Fprintf(w, "  %d\t%s\t%d/%d\t%s\t%s\n", f.ID, f.EventType, f.Attempts, f.MaxAttempts,
				formatTime(f.FailedAt), opsOneLine(f.LastError))
		}
		w.Flush()
	}
	if rep.Check.OK {
		fmt.Fprintln(&b, "\ncheck: ok")
	} else {
		fmt.Fprintf(&b, "\ncheck: FAILING: %s\n", strings.Join(rep.Check.Problems, "; "))
	}
}

func pendingAge(pending int64, seconds float64) string {
	if pending == 0 {
		return "-"
	}
	return formatAge(time.Duration(seconds * float64(time.Second)))
}

// countFailed counts the FAILED rows matching f. outbox.Retry's dry run is the runtime's
// count of exactly that; DryRun is forced here so this can never move a row.
func countFailed(ctx context.Context, db outbox.DBTX, f outbox.Filter) (int64, error) {
	f.DryRun = true
	return outbox.Retry(ctx, db, f)
}

// newestFailed returns up to n of the most recently FAILED messages, newest first: one
// ListFailed, which reads the FAILED rows through the claim index's status prefix and keeps the
// newest n (a top-n sort: its cost grows with the FAILED rows that Purge has not yet removed).
func newestFailed(ctx context.Context, db outbox.DBTX, n int) ([]outbox.FailedMessage, error) {
	return outbox.ListFailed(ctx, db, outbox.Filter{Newest: true}, n)
}

// ---- retry ----

func runRetry(args []string, stdout, stderr io.Writer) int {
	c := newOpsCmd("retry", retryHelp, stdout, stderr)
	var ids idsFlag
	c.fs.Var(&ids, "id", "a FAILED message's id (repeatable)")
	eventType := c.fs.String("event-type", "", "only messages of this event type (the wire name)")
	var since sinceFlag
	c.fs.Var(&since, "failed-since", "only messages that FAILED since: a duration ago (7d, 36h) or an RFC 3339 time")
	all := c.fs.Bool("all", false, "every FAILED message")
	dryRun := c.fs.Bool("dry-run", false, "list what would move and change nothing")
	if code, ok := c.parse(args); !ok {
		return code
	}
	selective := len(ids) > 0 || *eventType != "" || since.set
	if !selective && !*all {
		return c.usageErr("say which messages: --id, --event-type, --failed-since or --all")
	}
	if len(ids) > maxOpsIDs {
		return c.usageErr("at most %d --id at a time, got %d", maxOpsIDs, len(ids))
	}
	if selective && *all {
		return c.usageErr("--all selects every FAILED message; leave out --id, --event-type and --failed-since, or --all")
	}
	// The zero Filter (--all) selects every FAILED row.
	f := outbox.Filter{IDs: ids, EventType: *eventType, FailedSince: since.at(time.Now()), DryRun: *dryRun}

	ctx, stop := opsContext()
	defer stop()
	db, code, ok := c.open(ctx)
	if !ok {
		return code
	}
	return c.closeDB(db, c.retry(ctx, db, f))
}

// dryRunList caps the listing of a dry run; the count is always exact.
const dryRunList = 100

func (c *opsCmd) retry(ctx context.Context, db *sql.DB, f outbox.Filter) int {
	// Which given ids match is read first: after a retry they are no longer FAILED.
	var matched []outbox.FailedMessage
	if len(f.IDs) > 0 {
		var err error
		if matched, err = outbox.ListFailed(ctx, db, f, len(f.IDs)); err != nil {
			return c.dbErr("list failed", err)
		}
	}
	if !f.DryRun {
		n, err := outbox.Retry(ctx, db, f)
		if err != nil {
			// Batches before the error are committed; say how many moved.
			fmt.Fprintf(c.out, "retried %d message(s) before the error\n", n)
			return c.dbErr("retry", err)
		}
		fmt.Fprintf(c.out, "retried %d message(s): FAILED -> PENDING, attempts reset, due now\n", n)
		return c.explainMisses(ctx, db, f, n, matched)
	}
	n, err := outbox.Retry(ctx, db, f)
	if err != nil {
		return c.dbErr("retry --dry-run", err)
	}
	if n > 0 {
		list, err := outbox.ListFailed(ctx, db, f, dryRunList)
		if err != nil {
			return c.dbErr("list failed", err)
		}
		var b bytes.Buffer
		w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(w, "ID\tEVENT TYPE\tATTEMPTS\tFAILED AT\tLAST ERROR")
		for _, m := range list {
			fmt.Fprintf(w, "%d\t%s\t%d/%d\t%s\t%s\n", m.ID, c.clean(m.EventType), m.Attempts, m.MaxAttempts,
				formatTime(m.FailedAt), opsOneLine(opsTruncate(c.clean(m.LastError), lastErrorWidth)))
		}
		w.Flush()
		c.out.Write(b.Bytes())
		if int64(len(list)) < n {
			fmt.Fprintf(c.out, "... and %d more\n", n-int64(len(list)))
		}
	}
	fmt.Fprintf(c.out, "would retry %d message(s) (dry run: nothing changed)\n", n)
	return c.explainMisses(ctx, db, f, n, matched)
}

// formatTime prints a database time; "-" for one that is not set (a row made FAILED by hand
// without failed_at).
func formatTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// maxExplained caps how many unmatched ids are explained one by one.
const maxExplained = 20

// maxOpsIDs caps --id: the runtime's calls take a list of ids as one statement's arguments.
const maxOpsIDs = 10000

// explainMisses says why selectors matched less than asked: each given id that did not match
// (absent, not FAILED, or filtered out by the other selectors), and an event type that has no
// FAILED message (a typo looks exactly like success otherwise). matched holds the given ids'
// FAILED rows when the caller listed them.
func (c *opsCmd) explainMisses(ctx context.Context, db *sql.DB, f outbox.Filter, n int64, matched []outbox.FailedMessage) int {
	if len(f.IDs) > 0 && n < int64(len(f.IDs)) {
		fmt.Fprintf(c.out, "%d of the %d given id(s) did not match:\n", int64(len(f.IDs))-n, len(f.IDs))
		hit := map[outbox.MessageID]bool{}
		for _, m := range matched {
			hit[m.ID] = true
		}
		explained := 0
		for _, id := range f.IDs {
			if hit[id] {
				continue
			}
			if explained == maxExplained {
				fmt.Fprintln(c.out, "  ...")
				break
			}
			explained++
			r, err := outbox.Inspect(ctx, db, id)
			switch {
			case errors.Is(err, outbox.ErrNotFound):
				fmt.Fprintf(c.out, "  %d: no such message (purged, or never existed)\n", id)
			case err != nil:
				return c.dbErr("inspect", err)
			case r.Status != outbox.StatusFailed:
				fmt.Fprintf(c.out, "  %d: %s, not FAILED\n", id, r.Status)
			default:
				fmt.Fprintf(c.out, "  %d: FAILED, but left out by --event-type or --failed-since\n", id)
			}
		}
	}
	if f.EventType != "" && n == 0 {
		snap, err := outbox.Stats(ctx, db)
		if err != nil {
			return c.dbErr("stats", err)
		}
		if snap.ByType[f.EventType].Failed == 0 {
			var types []string
			for t, tc := range snap.ByType {
				if tc.Failed > 0 {
					types = append(types, c.clean(t))
				}
			}
			sort.Strings(types)
			hint := "no event type has FAILED messages"
			if len(types) > 0 {
				hint = "event types with FAILED messages: " + strings.Join(types, ", ")
			}
			fmt.Fprintf(c.out, "no FAILED message has event type %q (%s)\n", c.clean(f.EventType), hint)
		}
	}
	return opsExitOK
}

// ---- purge ----

func runPurge(args []string, stdout, stderr io.Writer) int {
	c := newOpsCmd("purge", purgeHelp, stdout, stderr)
	var olderThan durationFlag
	c.fs.Var(&olderThan, "older-than", "delete messages older than this (Go syntax or days: 7d)")
	var ids idsFlag
	c.fs.Var(&ids, "id", "delete this message (repeatable; needs --status)")
	status := c.fs.String("status", "sent", "which messages: sent or failed")
	batch := c.fs.Int("batch-size", 0, "rows per DELETE (0: the runtime's default)")
	dryRun := c.fs.Bool("dry-run", false, "count what would be deleted and delete nothing")
	if code, ok := c.parse(args); !ok {
		return code
	}
	statusGiven := false
	c.fs.Visit(func(f *flag.Flag) { statusGiven = statusGiven || f.Name == "status" })
	switch {
	case len(ids) > 0 && olderThan.set:
		return c.usageErr("--id and --older-than do not combine: --id deletes exactly the given messages")
	case len(ids) > 0 && !statusGiven:
		return c.usageErr("--id needs --status (sent or failed): say which messages may go")
	case len(ids) == 0 && !olderThan.set:
		return c.usageErr("say what to delete: --older-than D (e.g. 7d), or --id N with --status")
	}
	if olderThan.d < 0 {
		return c.usageErr("--older-than must not be negative, got %s", olderThan.String())
	}
	var st outbox.Status
	switch strings.ToLower(*status) {
	case "sent":
		st = outbox.StatusSent
	case "failed":
		st = outbox.StatusFailed
	default:
		return c.usageErr("--status must be sent or failed, got %q", *status)
	}
	if *batch < 0 || *batch > math.MaxInt32 {
		return c.usageErr("--batch-size must be between 0 and %d, got %d", math.MaxInt32, *batch)
	}
	if len(ids) > maxOpsIDs {
		return c.usageErr("at most %d --id at a time, got %d", maxOpsIDs, len(ids))
	}
	ctx, stop := opsContext()
	defer stop()
	db, code, ok := c.open(ctx)
	if !ok {
		return code
	}
	// Which given ids will not go, and why, is read first: afterwards a deleted id and one that
	// never existed look alike.
	var misses []string
	for _, id := range ids {
		if len(misses) == maxExplained {
			misses = append(misses, "  ...")
			break
		}
		r, err := outbox.Inspect(ctx, db, id)
		switch {
		case errors.Is(err, outbox.ErrNotFound):
			misses = append(misses, fmt.Sprintf("  %d: no such message", id))
		case err != nil:
			return c.closeDB(db, c.dbErr("inspect", err))
		case r.Status != st:
			misses = append(misses, fmt.Sprintf("  %d: %s, not %s: left alone", id, r.Status, st))
		}
	}
	f := outbox.PurgeFilter{Status: st, OlderThan: olderThan.d, IDs: ids, BatchSize: *batch, DryRun: *dryRun}
	what := fmt.Sprintf("%s message(s) older than %s", st, formatAge(olderThan.d))
	if len(ids) > 0 {
		what = fmt.Sprintf("of the %d given %s message(s)", len(ids), st)
	}
	n, err := outbox.Purge(ctx, db, f)
	if err != nil {
		if !*dryRun {
			// Batches before the error are committed; say how many went.
			fmt.Fprintf(c.out, "purged %d %s message(s) before the error\n", n, st)
		}
		return c.closeDB(db, c.dbErr("purge", err))
	}
	if *dryRun {
		fmt.Fprintf(c.out, "would purge %d %s (dry run: nothing deleted)\n", n, what)
	} else {
		fmt.Fprintf(c.out, "purged %d %s\n", n, what)
	}
	if len(ids) > 0 && n < int64(len(ids)) {
		for _, m := range misses {
			fmt.Fprintln(c.out, m)
		}
	}
	return c.closeDB(db, opsExitOK)
}

// ---- show ----

func runShow(args []string, stdout, stderr io.Writer) int {
	c := newOpsCmd("show", showHelp, stdout, stderr)
	var ids idsFlag
	c.fs.Var(&ids, "id", "the message's id")
	asJSON := c.fs.Bool("json", false, "print JSON (outbox.Record's fields)")
	if code, ok := c.parse(args); !ok {
		return code
	}
	if len(ids) != 1 {
		return c.usageErr("give one message: --id N")
	}
	ctx, stop := opsContext()
	defer stop()
	db, code, ok := c.open(ctx)
	if !ok {
		return code
	}
	r, err := outbox.Inspect(ctx, db, ids[0])
	if errors.Is(err, outbox.ErrNotFound) {
		fmt.Fprintf(c.errw, "outboxgen show: no message %d (purged, or never existed)\n", ids[0])
		return c.closeDB(db, opsExitCheck)
	}
	if err != nil {
		return c.closeDB(db, c.dbErr("inspect", err))
	}
	r.EventType, r.IdempotencyKey, r.LastError = c.clean(r.EventType), c.clean(r.IdempotencyKey), c.clean(r.LastError)
	r.Payload = c.cleanJSON(r.Payload)
	if *asJSON {
		enc := json.NewEncoder(c.out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(r); err != nil {
			fmt.Fprintf(c.errw, "outboxgen show: writing JSON: %s\n", c.clean(err.Error()))
			return c.closeDB(db, opsExitDB)
		}
		return c.closeDB(db, opsExitOK)
	}
	var b bytes.Buffer
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "id\t%d\n", r.ID)
	fmt.Fprintf(w, "event type\t%s\n", r.EventType)
	fmt.Fprintf(w, "status\t%s\n", r.Status)
	fmt.Fprintf(w, "attempts\t%d of %d\n", r.Attempts, r.MaxAttempts)
	fmt.Fprintf(w, "idempotency key\t%s\n", r.IdempotencyKey)
	fmt.Fprintf(w, "created at\t%s\n", formatTime(r.CreatedAt))
	fmt.Fprintf(w, "next attempt at\t%s\n", formatTime(r.NextAttemptAt))
	fmt.Fprintf(w, "last claimed at\t%s\n", formatTime(r.ClaimedAt))
	fmt.Fprintf(w, "lease until\t%s\n", formatTime(r.ReclaimAfter))
	fmt.Fprintf(w, "claim token\t%s\n", r.ClaimToken)
	fmt.Fprintf(w, "sent at\t%s\n", formatTime(r.SentAt))
	fmt.Fprintf(w, "failed at\t%s\n", formatTime(r.FailedAt))
	w.Flush()
	fmt.Fprintf(&b, "last error:\n%s\n", indent(r.LastError))
	payload := string(r.Payload)
	var pretty bytes.Buffer
	if json.Indent(&pretty, r.Payload, "", "  ") == nil {
		payload = pretty.String()
	}
	fmt.Fprintf(&b, "payload:\n%s\n", indent(payload))
	c.out.Write(b.Bytes())
	return c.closeDB(db, opsExitOK)
}

// cleanJSON masks the password in the strings (values and keys) of a JSON document, and only
// there: masking the raw text could turn a number or true into "*****" and the document into
// something that is not JSON.
func (c *opsCmd) cleanJSON(raw json.RawMessage) json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // numbers come back exactly as written
	var v any
	if err := dec.Decode(&v); err != nil {
		return json.RawMessage(strconv.Quote(c.clean(string(raw)))) // not JSON: shown as a string
	}
	var walk func(any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case string:
			return c.clean(x)
		case []any:
			for i := range x {
				x[i] = walk(x[i])
			}
		case map[string]any:
			m := make(map[string]any, len(x))
			for k, e := range x {
				m[c.clean(k)] = walk(e)
			}
			return m
		}
		return v
	}
	out, err := json.Marshal(walk(v))
	if err != nil {
		return json.RawMessage(strconv.Quote(c.clean(string(raw))))
	}
	return out
}

// indent prefixes every line of s with four spaces; "-" for an empty s.
func indent(s string) string {
	if s == "" {
		return "    -"
	}
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ")
}

// ---- migrate ----

func runMigrate(args []string, stdout, stderr io.Writer) int {
	c := newOpsCmd("migrate", migrateHelp, stdout, stderr)
	if code, ok := c.parse(args); !ok {
		return code
	}
	ctx, stop := opsContext()
	defer stop()
	db, code, ok := c.open(ctx)
	if !ok {
		return code
	}
	if err := outbox.Migrate(ctx, db); err != nil {
		return c.closeDB(db, c.dbErr("migrate", err))
	}
	fmt.Fprintln(c.out, "outbox schema applied (tables that already existed were left as they were)")
	return c.closeDB(db, opsExitOK)
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

// sinceFlag is --failed-since: an RFC 3339 time, or a duration ago.
type sinceFlag struct {
	t   time.Time
	ago time.Duration
	set bool
}

func (f *sinceFlag) String() string { return "" }

func (f *sinceFlag) Set(s string) error {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		f.t, f.ago, f.set = t.UTC(), 0, true
		return nil
	}
	d, err := parseDurationDays(s)
	if err != nil {
		return fmt.Errorf("want a duration ago (7d, 36h) or an RFC 3339 time: %v", err)
	}
	if d <= 0 {
		return fmt.Errorf("the duration must be positive, got %s", s)
	}
	f.t, f.ago, f.set = time.Time{}, d, true
	return nil
}

// at resolves the flag against now; the zero time means "no time filter".
func (f *sinceFlag) at(now time.Time) time.Time {
	if !f.set {
		return time.Time{}
	}
	if f.ago > 0 {
		return now.Add(-f.ago).UTC()
	}
	return f.t
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
