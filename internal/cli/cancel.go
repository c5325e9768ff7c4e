// outboxgen cancel: PENDING messages that must never be delivered become CANCELLED
// (outbox.Cancel).

package cli

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"

	"github.com/outboxgen/outboxgen/runtime/outbox"
)

const cancelHelp = `usage: outboxgen cancel (--id N ... | --event-type T) [--dry-run] [--dsn DSN]

Makes the selected PENDING messages CANCELLED (outbox.Cancel): a terminal status of its own,
never delivered nor retried, kept until outboxgen purge --status cancelled. A message running
now finishes its attempt: if that fails, it becomes CANCELLED instead of being retried; if it
succeeds it stays SENT. A cancelled ordered message leaves its key, so the key's next message
goes on. --id and --event-type combine (AND); one of them is required. SENT, FAILED and
CANCELLED messages are left alone.

Run it with --dry-run first: it prints the count it would change and changes nothing.
`

func runCancel(args []string, stdout, stderr io.Writer) int {
	c := newOpsCmd("cancel", cancelHelp, stdout, stderr)
	var ids idsFlag
	c.fs.Var(&ids, "id", "a PENDING message's id (repeatable)")
	eventType := c.fs.String("event-type", "", "every PENDING message of this event type (the wire name)")
	dryRun := c.fs.Bool("dry-run", false, "count what would be cancelled and change nothing")
	if code, ok := c.parse(args); !ok {
		return code
	}
	if len(ids) == 0 && *eventType == "" {
		return c.usageErr("say which messages: --id N (repeatable) or --event-type T")
	}
	if len(ids) > maxOpsIDs {
		return c.usageErr("at most %d --id at a time, got %d", maxOpsIDs, len(ids))
	}
	if *eventType != "" {
		if err := checkTypeArg(*eventType); err != nil {
			return c.usageErr("--event-type: %v", err)
		}
	}
	ctx, stop := opsContext()
	defer stop()
	db, code, ok := c.open(ctx)
	if !ok {
		return code
	}
	return c.closeDB(db, c.cancel(ctx, db, outbox.Filter{IDs: ids, EventType: *eventType, DryRun: *dryRun}))
}

func (c *opsCmd) cancel(ctx context.Context, db *sql.DB, f outbox.Filter) int {
	n, err := outbox.Cancel(ctx, db, f)
	switch {
	case err != nil && f.DryRun:
		return c.dbErr("cancel --dry-run", err)
	case err != nil:
		fmt.Fprintf(c.out, "cancelled %d message(s) before the error\n", n)
		return c.dbErr("cancel", err)
	case f.DryRun:
		fmt.Fprintf(c.out, "would cancel %d message(s) (dry run: nothing changed)\n", n)
	default:
		fmt.Fprintf(c.out, "cancelled %d message(s): PENDING -> CANCELLED; running ones become CANCELLED when their attempt fails\n", n)
	}
	if len(f.IDs) == 0 || n >= int64(len(f.IDs)) {
		return opsExitOK
	}
	// Why given ids did not change. After the write a cancelled id reads CANCELLED, so only
	// the others are named.
	explained := 0
	for _, id := range f.IDs {
		if explained == maxExplained {
			fmt.Fprintln(c.out, "  ...")
			break
		}
		r, err := outbox.Inspect(ctx, db, id)
		switch {
		case errors.Is(err, outbox.ErrNotFound):
			fmt.Fprintf(c.out, "  %d: no such message (purged, or never existed)\n", id)
		case err != nil:
			return c.dbErr("inspect", err)
		case r.Status == outbox.StatusSent || r.Status == outbox.StatusFailed || (r.Status == outbox.StatusCancelled && f.DryRun):
			fmt.Fprintf(c.out, "  %d: %s, left alone\n", id, r.Status)
		case f.EventType != "" && r.EventType != f.EventType:
			fmt.Fprintf(c.out, "  %d: of event type %s, left out by --event-type\n", id, c.line(r.EventType))
		default:
			continue
		}
		explained++
	}
	return opsExitOK
}
