// outboxgen retry: moves FAILED messages back to PENDING (outbox.Retry), and says why given ids
// or an event type matched nothing.

package cli

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/outboxgen/outboxgen/runtime/outbox"
)

const retryHelp = `usage: outboxgen retry (--id N ... | --event-type T | --failed-since D | --all) [--dry-run] [--dsn DSN]
       outboxgen retry --pending [--id N ... | --event-type T] [--dry-run] [--dsn DSN]

Moves FAILED messages back to PENDING, due now, with attempts reset to 0 (outbox.Retry).
The selectors combine (AND); at least one is required; --all selects every FAILED message.
Prints the count, and names the given ids that did not match and why; with --dry-run it lists
the messages that would move (the first 100; the count is exact) and changes nothing.

--failed-since takes a duration ago in Go syntax plus days (30m, 36h, 7d, 1d12h), measured on
the database clock (the one failed_at is written with), or an RFC 3339 time
(2026-12-01T00:00:00Z). A message made FAILED by hand without failed_at matches only --id,
--event-type and --all.

--pending instead makes PENDING messages that wait for a retry's backoff or a delay due now
(outbox.RetryPending), with their attempts unchanged: the drain after an outage ends. With no
--id or --event-type it takes every waiting PENDING message. Running messages are never touched.
`

func runRetry(args []string, stdout, stderr io.Writer) int {
	c := newOpsCmd("retry", retryHelp, stdout, stderr)
	var ids idsFlag
	c.fs.Var(&ids, "id", "a FAILED message's id (repeatable)")
	eventType := c.fs.String("event-type", "", "only messages of this event type (the wire name)")
	var since sinceFlag
	c.fs.Var(&since, "failed-since", "only messages that FAILED since: a duration ago (7d, 36h) or an RFC 3339 time")
	all := c.fs.Bool("all", false, "every FAILED message")
	dryRun := c.fs.Bool("dry-run", false, "list what would move and change nothing")
	pending := c.fs.Bool("pending", false, "make waiting PENDING messages due now instead (attempts unchanged)")
	if code, ok := c.parse(args); !ok {
		return code
	}
	if *pending {
		return c.runRetryPending(ids, *eventType, since.set, *all, *dryRun)
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
	f := outbox.Filter{IDs: ids, EventType: *eventType, FailedSince: since.t, FailedWithin: since.ago, DryRun: *dryRun}

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
			fmt.Fprintf(w, "%d\t%s\t%d/%d\t%s\t%s\n", m.ID, c.line(m.EventType), m.Attempts, m.MaxAttempts,
				formatTime(m.FailedAt), c.cell(m.LastError, lastErrorWidth))
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
					types = append(types, c.line(t))
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

// sinceFlag is --failed-since: an RFC 3339 time, or a duration ago (the runtime measures it on
// the database clock: outbox.Filter.FailedWithin).
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
