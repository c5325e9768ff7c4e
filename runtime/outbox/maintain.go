// Steps 4 and 5 of the worker's cycle, the reclaim and the watch. Every ReclaimInterval,
// expired leases are returned to PENDING or FAILED. Rows stuck past three leases are reported.

package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/outboxgen/outboxgen/runtime/incident"
)

// maintainLoop runs the reclaim and the stuck watch at start and then every ReclaimInterval
// until ctx is done.
func (w *Worker) maintainLoop(ctx context.Context) {
	// Retention runs beside, so that a long cleaning pass never delays a reclaim.
	retained := make(chan struct{})
	go func() {
		defer close(retained)
		w.retentionLoop(ctx)
	}()
	defer func() { <-retained }()
	t := time.NewTicker(w.cfg.ReclaimInterval)
	defer t.Stop()
	reclaimDown, watchDown, brokenDown := outage{what: "reclaim"}, outage{what: "stuck watch"}, outage{what: "broken key repair"}
	for {
		if !w.cfg.DisableReclaim {
			n, err := w.reclaimOnce(ctx)
			if err != nil && ctx.Err() == nil {
				reclaimDown.fail(ctx, w.log, err)
			} else if err == nil {
				reclaimDown.ok(ctx, w.log)
			}
			w.testSignals.reclaimed.Signal(n)
		}
		w.repairBroken(ctx, &brokenDown)
		if _, err := w.watchOnce(ctx); err != nil && ctx.Err() == nil {
			watchDown.fail(ctx, w.log, err)
		} else if err == nil {
			watchDown.ok(ctx, w.log)
		}
		w.schemaWatch(ctx)
		w.testSignals.maintained.Signal(struct{}{})
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// reclaimOnce returns expired leases to PENDING in batches, or to FAILED when attempts are
// exhausted. It returns how many rows it moved. The UPDATE is idempotent, so every worker runs
// it without a leader.
func (w *Worker) reclaimOnce(ctx context.Context) (int64, error) {
	var total int64
	for {
		n, err := execReadCommitted(ctx, w.db, func(tx *sql.Tx) (int64, error) {
			return reclaimStaleTx(ctx, tx)
		})
		total += n
		if err != nil {
			return total, fmt.Errorf("reclaim: %w", err)
		}
		if n < reclaimBatch {
			break
		}
	}
	w.cfg.Observer.Reclaimed(total)
	if total > 0 {
		w.log.LogAttrs(ctx, slog.LevelWarn, "outbox reclaimed expired claims", slog.Int64("reclaimed", total))
		w.Wake()
	}
	return total, nil
}

// watchOnce counts stuck rows and reports them as an incident each time it sees any. A stuck
// row is PROCESSING past three times its lease, so nobody is reclaiming it.
func (w *Worker) watchOnce(ctx context.Context) (int64, error) {
	n, err := q.MessageCountStuck(ctx, w.db)
	if err != nil {
		return 0, fmt.Errorf("count stuck: %w", err)
	}
	if n > 0 {
		w.cfg.Observer.Stuck(n)
		msg := fmt.Sprintf("%d messages PROCESSING for more than 3x their lease: nobody is reclaiming them", n)
		if w.cfg.DisableReclaim {
			msg += " (this worker's reclaim is disabled)"
		}
		// Through report only. A line of our own as well would page log-based alerting twice.
		w.report(ctx, incident.Incident{Kind: incident.Stuck, Subject: "outbox_messages", Err: errors.New(msg)})
	}
	return n, nil
}
