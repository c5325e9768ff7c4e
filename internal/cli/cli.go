// Package cli is the outboxgen command, as a function of its arguments and output streams so
// tests run it in-process (cmd/outboxgen/main.go is one line over Main). The generator's
// subcommands and the dispatcher live here; the operator subcommands live in ops.go.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"

	"github.com/outboxgen/outboxgen/gen"
	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// Exit codes of the generator's subcommands (docs/events-yaml.md, "The CLI"): 1 = invalid
// catalog or stale output, 2 = usage, including a catalog that cannot be read (a wrong -f or
// directory, as the operator commands give 2 for a missing DSN: the command was not pointed at
// its input).
const (
	genExitOK      = 0
	genExitInvalid = 1
	genExitUsage   = 2
)

const mainHelp = `outboxgen turns events.yaml into typed Go code over a transactional outbox on MySQL/MariaDB,
and operates that outbox.

usage: outboxgen <command> [flags]

Generator:
  generate [-f events.yaml]   write the Go file the catalog's output: names
  check    [-f events.yaml]   validate the catalog; write nothing
  diff     [-f events.yaml]   print a unified diff and exit 1 when the file on disk is stale
  asyncapi [-f events.yaml] [-o file]
                              print the AsyncAPI 3.0 document of the outbox events (for a relay's consumers)
  breaking [-f events.yaml] --against PATH|REV:PATH
                              list the changes that break stored rows or their consumers; exit 1 if any
  schema [--upgrade --dsn]    print the DDL, or what one database still needs (goose, atlas, ...)
  version                     print the version

Operations (the database from --dsn or $OUTBOX_DSN):
  status                      counts by event type, stale and stuck rows, recent failures
  show                        one message whole: its full last_error and payload
  retry                       move FAILED messages back to PENDING (--pending: make backed-off ones due now)
  purge                       delete SENT (FAILED, CANCELLED) messages older than a retention, or by id
  pause, resume               stop and restart the claiming of event types, fleet-wide
  cancel                      make PENDING messages CANCELLED: never delivered
  migrate                     create the missing tables; check the existing ones
  console                     the on-call web page: counts, chart, FAILED messages, retry

  help                        this text; "outboxgen <command> -h" describes a command

Install in a module: go get -tool github.com/outboxgen/outboxgen/cmd/outboxgen
Then, next to events.yaml: //go:generate go tool outboxgen generate -f events.yaml

Exit codes: 0 ok, 1 invalid catalog or stale output (status --check: a problem found),
2 usage (also: no catalog at the -f path), 3 database failure (operations), 130 interrupted.
`

// Main runs outboxgen with args (without the program name) and returns the exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, mainHelp)
		return genExitUsage
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, mainHelp)
		return genExitOK
	case "generate", "check", "diff":
		return runCatalog(cmd, rest, stdout, stderr)
	case "asyncapi":
		return runAsyncAPI(rest, stdout, stderr)
	case "breaking":
		return runBreaking(rest, stdout, stderr)
	case "schema":
		return runSchema(rest, stdout, stderr)
	case "version":
		return runSimple("version", rest, stdout, stderr, func() { fmt.Fprintf(stdout, "outboxgen %s\n", version()) })
	case "status":
		return runStatus(rest, stdout, stderr)
	case "show":
		return runShow(rest, stdout, stderr)
	case "retry":
		return runRetry(rest, stdout, stderr)
	case "purge":
		return runPurge(rest, stdout, stderr)
	case "pause":
		return runPause(rest, stdout, stderr)
	case "resume":
		return runResume(rest, stdout, stderr)
	case "cancel":
		return runCancel(rest, stdout, stderr)
	case "migrate":
		return runMigrate(rest, stdout, stderr)
	case "console":
		return runConsole(rest, stdout, stderr)
	}
	did := ""
	if s := gen.Suggest(cmd, commands); s != "" {
		did = fmt.Sprintf(" (did you mean %q?)", s)
	}
	fmt.Fprintf(stderr, "outboxgen: unknown command %q%s\nRun 'outboxgen help' for the list of commands.\n", cmd, did)
	return genExitUsage
}

// commands are the names Main dispatches, for the hint after an unknown one.
var commands = []string{"generate", "check", "diff", "asyncapi", "breaking", "schema", "version", "status", "show", "retry", "purge", "pause", "resume", "cancel", "migrate", "console", "help"}

var catalogHelp = map[string]string{
	"generate": "usage: outboxgen generate [-f events.yaml]\n\nValidates the catalog and writes the Go file its output: names (relative to the catalog).\nOn any problem nothing is written and every problem is printed as file:line:col: message.\n",
	"check":    "usage: outboxgen check [-f events.yaml]\n\nValidates the catalog and prints every problem, or one line with what it declares; writes\nnothing.\n",
	"diff":     "usage: outboxgen diff [-f events.yaml]\n\nPrints a unified diff from the file on disk to what generate would write, and exits 1\nwhen they differ (for CI: the committed code is stale).\n",
}

func runCatalog(cmd string, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("outboxgen "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("f", "events.yaml", "the catalog")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), catalogHelp[cmd], "\nFlags:\n")
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args, stdout); !ok {
		return code
	}
	src, ok := readCatalog(cmd, *path, "-f", stderr)
	if !ok {
		return genExitUsage
	}
	if cmd == "check" {
		sum, err := gen.Check(*path, src)
		if err != nil {
			return reportCatalog(stderr, err)
		}
		fmt.Fprintf(stdout, "%s: ok (%s, %s)\n", *path, plural(sum.Events, "event"), plural(sum.Types, "type"))
		return genExitOK
	}
	files, err := gen.Generate(*path, src)
	if err != nil {
		return reportCatalog(stderr, err)
	}
	if cmd == "diff" {
		d, err := gen.Diff(files)
		if err != nil {
			fmt.Fprintf(stderr, "outboxgen diff: %v\n", err)
			return genExitInvalid
		}
		if d != "" {
			fmt.Fprint(stdout, d)
			return genExitInvalid
		}
		return genExitOK
	}
	if _, err := gen.Write(files); err != nil {
		fmt.Fprintf(stderr, "outboxgen generate: %v\n", err)
		return genExitInvalid
	}
	return genExitOK
}

// readCatalog reads the catalog at path, named by the flag flagName, or says on stderr why it
// cannot (a usage error: the command was not pointed at a catalog).
func readCatalog(cmd, path, flagName string, stderr io.Writer) ([]byte, bool) {
	src, err := os.ReadFile(path)
	if err == nil {
		return src, true
	}
	// The path as given may be relative to a directory the user did not expect
	// (go generate runs in the package's): say where it looked.
	abs, absErr := filepath.Abs(path)
	if absErr != nil {
		abs = path
	}
	if errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(stderr, "outboxgen %s: no catalog at %s (%s names it, relative to the current directory)\n", cmd, abs, flagName)
		return nil, false
	}
	reason := err
	if u := errors.Unwrap(err); u != nil {
		reason = u // "open PATH: is a directory" without the relative PATH
	}
	fmt.Fprintf(stderr, "outboxgen %s: read catalog %s: %v\n", cmd, abs, reason)
	return nil, false
}

// reportCatalog prints a catalog's problems one per line, in the go build shape.
func reportCatalog(stderr io.Writer, err error) int {
	var list gen.ErrorList
	if errors.As(err, &list) {
		for _, e := range list {
			fmt.Fprintln(stderr, e.Error())
		}
		return genExitInvalid
	}
	fmt.Fprintf(stderr, "outboxgen: %v\n", err)
	return genExitInvalid
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// runSimple runs a command that takes no arguments.
func runSimple(cmd string, args []string, stdout, stderr io.Writer, run func()) int {
	fs := flag.NewFlagSet("outboxgen "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprintf(fs.Output(), "usage: outboxgen %s\n", cmd) }
	if code, ok := parseFlags(fs, args, stdout); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "outboxgen %s: takes no arguments, got %q\n", cmd, fs.Args())
		return genExitUsage
	}
	run()
	return genExitOK
}

// parseFlags parses args; -h prints the usage to stdout and exits 0, a bad flag exits 2.
func parseFlags(fs *flag.FlagSet, args []string, stdout io.Writer) (int, bool) {
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fs.SetOutput(stdout)
		fs.Usage()
		return genExitOK, false
	}
	if err != nil {
		return genExitUsage, false // the flag package has printed the problem and the usage
	}
	if fs.NArg() > 0 && fs.Lookup("f") != nil {
		fmt.Fprintf(fs.Output(), "%s: unexpected argument %q (name the catalog with -f)\n", fs.Name(), fs.Arg(0))
		return genExitUsage, false
	}
	return 0, true
}

// version is the release this generator belongs to (outbox.Version: one version covers the
// whole repository), plus, when the build says otherwise, what the binary was really built
// from: a pseudo-version of an untagged commit, or a replace directive.
func version() string {
	info, _ := debug.ReadBuildInfo()
	if d := buildDetail(info); d != "" {
		return outbox.Version + " (" + d + ")"
	}
	return outbox.Version
}

// buildDetail is what info adds to outbox.Version: "" when it agrees or knows nothing (a build
// in this repository says "(devel)"), "module V" for another version of the module, "replaced
// by PATH" when a replace directive supplied it.
func buildDetail(info *debug.BuildInfo) string {
	if info == nil {
		return ""
	}
	mod := &info.Main
	if mod.Path != "github.com/outboxgen/outboxgen" {
		// Built as a tool of another module: our module is one of its dependencies.
		mod = nil
		for _, dep := range info.Deps {
			if dep.Path == "github.com/outboxgen/outboxgen" {
				mod = dep
				break
			}
		}
		if mod == nil {
			return ""
		}
	}
	if mod.Replace != nil {
		return "replaced by " + mod.Replace.Path
	}
	if mod.Version == "" || mod.Version == "(devel)" || mod.Version == outbox.Version {
		return ""
	}
	return "module " + mod.Version
}
