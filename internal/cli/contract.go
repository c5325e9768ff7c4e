package cli

// The catalog as a contract: asyncapi describes the outbox events for consumers that read them
// from a relay without Go; breaking compares the catalog with an earlier version (a file, or
// a git revision) and lists what would break rows already stored or their consumers.

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/outboxgen/outboxgen/gen"
)

const asyncAPIHelp = `usage: outboxgen asyncapi [-f events.yaml] [-o file] [--address-prefix outbox.]

Prints the AsyncAPI 3.0 document (YAML) of the catalog's outbox events: one channel per event,
its address the prefix and the event type (the NATS subject runtime/outboxnats publishes on and
the Kafka topic runtime/outboxkafka produces to: give --address-prefix the prefix your relay is
configured with), a send operation, and the message: the headers the relays send and the
payload as a JSON Schema of the wire format. Direct events are left out: they never leave the
process. The output is deterministic.

With -o the document is written to the file (only when it changed), which must not exist or
hold a document outboxgen wrote.
`

func runAsyncAPI(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("outboxgen asyncapi", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("f", "events.yaml", "the catalog")
	out := fs.String("o", "", "write the document to this file instead of standard output")
	prefix := fs.String("address-prefix", gen.DefaultAddressPrefix, "put before the event type in each channel's address: the relay's subject or topic prefix")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), asyncAPIHelp, "\nFlags:\n")
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args, stdout); !ok {
		return code
	}
	if !addressPrefixRe.MatchString(*prefix) {
		fmt.Fprintf(stderr, "outboxgen asyncapi: --address-prefix %q: use letters, digits, '.', '_' and '-' (what both a NATS subject and a Kafka topic can hold)\n", *prefix)
		return genExitUsage
	}
	src, ok := readCatalog("asyncapi", *path, "-f", stderr)
	if !ok {
		return genExitUsage
	}
	doc, err := gen.AsyncAPI(*path, src, *prefix)
	if err != nil {
		return reportCatalog(stderr, err)
	}
	if *out == "" {
		if _, err := stdout.Write(doc); err != nil {
			fmt.Fprintf(stderr, "outboxgen asyncapi: %v\n", err)
			return genExitInvalid
		}
		return genExitOK
	}
	if err := writeDocument(*out, doc); err != nil {
		fmt.Fprintf(stderr, "outboxgen asyncapi: %v\n", err)
		return genExitInvalid
	}
	return genExitOK
}

// addressPrefixRe is what a prefix of both a NATS subject and a Kafka topic may hold.
var addressPrefixRe = regexp.MustCompile(`^[A-Za-z0-9._-]*$`)

// generatedYAML is the line outboxgen's own documents start with.
var generatedYAML = regexp.MustCompile(`(?m)^# Code generated .* DO NOT EDIT\.\r?$`)

// writeDocument writes doc to path through a temporary file and a rename, unless the file
// already holds it; a file that outboxgen did not write is left alone.
func writeDocument(path string, doc []byte) error {
	have, err := os.ReadFile(path)
	switch {
	case err == nil && bytes.Equal(have, doc):
		return nil
	case err == nil && len(bytes.TrimSpace(have)) > 0 && !generatedYAML.Match(have):
		return fmt.Errorf("%s is not a document outboxgen wrote (no %q line): it will not overwrite it (choose another -o, or move the file)", path, gen.AsyncAPIHeader)
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".outboxgen-*.tmp")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(doc)
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Chmod(tmp.Name(), 0o644)
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), path)
	}
	if werr != nil {
		if rerr := os.Remove(tmp.Name()); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			werr = fmt.Errorf("%w (and removing %s: %v)", werr, tmp.Name(), rerr)
		}
		return fmt.Errorf("write %s: %w", path, werr)
	}
	return nil
}

const breakingHelp = `usage: outboxgen breaking [-f events.yaml] --against PATH|REV:PATH [--accept ID]...

Compares the catalog with an earlier version of it and prints every change that breaks rows
already stored or their consumers, one per line as file:line:col: message [change: ID] at its
place in the catalog (a removed event or field is reported at its parent, naming its line in
the other version), and exits 1; prints one line and exits 0 when nothing breaks.

A change made on purpose is accepted by its ID, with a reason, in the catalog:

  accept_breaking:
    - change: event order_placed field note removed
      reason: nothing reads note since March; none pending (outboxgen status)

An accepted change is printed as accepted and no longer fails. An entry applies to the
comparison that adds it: one the other version holds already (same change and reason) is
ignored, so it may stay after the merge. An added entry that matches no change fails (stale).
--accept ID accepts a change for one run, without writing it down.

--against names a file, or a git revision and a path as git show takes them, run in the
catalog's directory: origin/main:path/events.yaml is relative to the repository's root,
HEAD:./events.yaml to the catalog's directory. In CI:

  go tool outboxgen breaking -f events.yaml --against origin/main:path/events.yaml

Breaking: a removed event (a renamed one is removed and added), a delivery change, a removed
field, a new field that is not optional, a field made required, a type changed to one that
some stored value does not decode as, a removed enum value, a changed or removed
idempotency_key, an ordering_key added, changed or removed, an ordering group changed. Safe: a new event, a new optional field, a new enum value, descriptions,
max_attempts, backoff, timeout, field order, direct events' payloads, and widenings (int32 to
int64, an enum to string, anything to json); docs/catalog-contract.md has the table.
`

func runBreaking(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("outboxgen breaking", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("f", "events.yaml", "the catalog")
	against := fs.String("against", "", "the version to compare with: a file, or REV:PATH for git show (required)")
	var accept []string
	fs.Func("accept", "accept the breaking change of this `ID` for this run (repeat for several)", func(id string) error {
		accept = append(accept, id)
		return nil
	})
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), breakingHelp, "\nFlags:\n")
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args, stdout); !ok {
		return code
	}
	if *against == "" {
		fmt.Fprintf(stderr, "outboxgen breaking: --against is required: the version to compare with, a file or a git revision and path (origin/main:events.yaml)\n")
		return genExitUsage
	}
	src, ok := readCatalog("breaking", *path, "-f", stderr)
	if !ok {
		return genExitUsage
	}
	old, ok := readAgainst(*against, *path, stderr)
	if !ok {
		return genExitUsage
	}
	rep, err := gen.Breaking(*path, src, *against, old, accept...)
	var invalidOld *gen.AgainstError
	switch {
	case errors.As(err, &invalidOld):
		for _, e := range invalidOld.List {
			fmt.Fprintln(stderr, e.Error())
		}
		fmt.Fprintf(stderr, "outboxgen breaking: the version to compare with (%s) is not a valid catalog\n", *against)
		return genExitInvalid
	case err != nil:
		return reportCatalog(stderr, err)
	}
	return printBreaking(rep, *path, *against, stdout, stderr)
}

// printBreaking prints every change found, the failing ones with the ID that accepts them,
// then the stale acceptances, and returns the exit code.
func printBreaking(rep *gen.BreakingReport, path, against string, stdout, stderr io.Writer) int {
	accepted := 0
	for _, c := range rep.All {
		if a := c.Accepted; a != nil {
			accepted++
			by := "--accept"
			if a.Line > 0 {
				by = fmt.Sprintf("accept_breaking at line %d: %q", a.Line, a.Reason)
			}
			fmt.Fprintf(stdout, "%s:%d:%d: accepted (%s): %s\n", c.Path, c.Line, c.Col, by, c.Msg)
			continue
		}
		fmt.Fprintf(stdout, "%s [change: %s]\n", c.Error.Error(), c.ID)
	}
	for _, e := range rep.Stale {
		fmt.Fprintln(stdout, e.Error())
	}
	for _, s := range rep.StaleFlags {
		fmt.Fprintf(stdout, "outboxgen breaking: %s\n", s)
	}
	if len(rep.Changes) > 0 {
		first := ""
		for _, c := range rep.All {
			if c.Accepted == nil {
				first = c.ID
				break
			}
		}
		fmt.Fprintf(stderr, "outboxgen breaking: %s against %s. One made on purpose is accepted in %s by its change ID, with a reason (docs/catalog-contract.md):\n\naccept_breaking:\n  - change: %s\n    reason: why, and what was done about the rows it affects\n",
			plural(len(rep.Changes), "breaking change"), against, filepath.Base(path), strconv.Quote(first))
	}
	if rep.Failed() {
		return genExitInvalid
	}
	beyond := ""
	if accepted > 0 {
		beyond = fmt.Sprintf(" beyond the %d accepted", accepted)
	}
	fmt.Fprintf(stdout, "%s: no breaking change against %s%s (%s compared, %d new)\n", path, against, beyond, plural(rep.Compared, "outbox event"), rep.Added)
	return genExitOK
}

// readAgainst reads the version to compare with: the file against names, or else, when it
// has the form REV:PATH, what git show prints for it in the catalog's directory.
func readAgainst(against, catalogPath string, stderr io.Writer) ([]byte, bool) {
	if fi, err := os.Stat(against); err == nil || !strings.Contains(against, ":") {
		if err == nil && fi.IsDir() {
			fmt.Fprintf(stderr, "outboxgen breaking: --against %s is a directory; name the catalog file\n", against)
			return nil, false
		}
		return readCatalog("breaking", against, "--against", stderr)
	}
	rev, p, _ := strings.Cut(against, ":")
	if rev == "" || p == "" || strings.HasPrefix(rev, "-") {
		fmt.Fprintf(stderr, "outboxgen breaking: --against %q: want a file, or REV:PATH (origin/main:events.yaml)\n", against)
		return nil, false
	}
	dir := filepath.Dir(catalogPath)
	cmd := exec.Command("git", "show", against)
	cmd.Dir = dir
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		why := strings.TrimSpace(errOut.String())
		if why == "" {
			why = err.Error()
		}
		fmt.Fprintf(stderr, "outboxgen breaking: git show %s (in %s): %s\n", against, dir, why)
		return nil, false
	}
	return out.Bytes(), true
}
