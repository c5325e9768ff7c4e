// outboxgen purge: deletes old SENT or FAILED messages, or the given ones, in small batches
// (outbox.Purge).

package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/outboxgen/outboxgen/runtime/outbox"
)

const purgeHelp = `usage: outboxgen purge (--older-than D | --id N ...) [--status sent|failed|cancelled] [--force] [--batch-size N] [--dry-run] [--dsn DSN]

Deletes SENT messages (default) whose sent_at, FAILED messages whose failed_at, or CANCELLED
messages whose cancelled_at, is older than
D (Go syntax plus days: 7d, 36h, 1d12h), in small batches so that no statement holds many row
locks for long (outbox.Purge). Ages are measured on the database clock. A row made FAILED by
hand while it was due in the future is purged once that due time is older than D, too; one
without failed_at counts as failed at its due time.

A window under an hour (--older-than 30m), or --older-than 0 (every message of that status),
needs --force: 7s and 7d differ by one key. --dry-run never needs it.

--id deletes exactly the given messages, whatever their age, if they have --status (which must
then be given): how to discard a FAILED message that must never be delivered (read it first
with outboxgen show --id N). Messages of another status are left alone and named.

Prints the count; with --dry-run, the count it would delete, deleting nothing.
`

// purgeFloor is the shortest --older-than that needs no --force: a purge of rows younger than
// this is more likely a slip (7s for 7d, 0 for "everything") than a retention.
const purgeFloor = time.Hour

func runPurge(args []string, stdout, stderr io.Writer) int {
	c := newOpsCmd("purge", purgeHelp, stdout, stderr)
	var olderThan durationFlag
	c.fs.Var(&olderThan, "older-than", "delete messages older than this (Go syntax or days: 7d)")
	var ids idsFlag
	c.fs.Var(&ids, "id", "delete this message (repeatable; needs --status)")
	status := c.fs.String("status", "sent", "which messages: sent, failed or cancelled")
	batch := c.fs.Int("batch-size", 0, "rows per DELETE (0: the runtime's default)")
	dryRun := c.fs.Bool("dry-run", false, "count what would be deleted and delete nothing")
	force := c.fs.Bool("force", false, "allow --older-than under an hour, or 0 (everything of that status)")
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
	case "cancelled":
		st = outbox.StatusCancelled
	default:
		return c.usageErr("--status must be sent, failed or cancelled, got %q", *status)
	}
	if olderThan.set && olderThan.d < purgeFloor && !*force && !*dryRun {
		if olderThan.d == 0 {
			return c.usageErr("--older-than 0 purges every %s message; add --force if that is what you mean (--dry-run counts them)", st)
		}
		return c.usageErr("--older-than %s purges %s messages only %s old: a window under %s needs --force (days are written 7d; --dry-run counts them)",
			olderThan.String(), st, olderThan.String(), formatAge(purgeFloor))
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
