// outboxgen retry --pending: PENDING messages waiting for a retry's backoff or a delay become
// due now (outbox.RetryPending).

package cli

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/outboxgen/outboxgen/runtime/outbox"
)

func (c *opsCmd) retryPending(ctx context.Context, db *sql.DB, f outbox.Filter) int {
	n, err := outbox.RetryPending(ctx, db, f)
	switch {
	case err != nil && f.DryRun:
		return c.dbErr("retry --pending --dry-run", err)
	case err != nil:
		fmt.Fprintf(c.out, "made %d message(s) due before the error\n", n)
		return c.dbErr("retry --pending", err)
	case f.DryRun:
		fmt.Fprintf(c.out, "would make %d waiting PENDING message(s) due now (dry run: nothing changed)\n", n)
	default:
		fmt.Fprintf(c.out, "made %d waiting PENDING message(s) due now, attempts unchanged\n", n)
	}
	return opsExitOK
}

// runRetryPending is retry --pending once its flags are parsed.
func (c *opsCmd) runRetryPending(ids idsFlag, eventType string, since, all, dryRun bool) int {
	if since || all {
		return c.usageErr("--pending takes --id and --event-type only: --failed-since and --all select FAILED messages")
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
	return c.closeDB(db, c.retryPending(ctx, db, outbox.Filter{IDs: ids, EventType: eventType, DryRun: dryRun}))
}
