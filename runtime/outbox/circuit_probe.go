// The probe of an open circuit: a claim of one due message of the type, in a transaction of
// its own, as claim.go claims. Its handler's outcome closes the circuit or keeps it open.

package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"

	"github.com/outboxgen/outboxgen/runtime/internal/store"
)

// claimProbes claims and dispatches a probe for each open circuit due for one, with up to n
// of the slots reserved for the claim. used is how many slots the probes took. A failed
// probe claim is logged and tried again at the next probe's time.
func (w *Worker) claimProbes(ctx context.Context, n int) (used int) {
	if n <= 0 || w.schemaHeld() {
		return 0
	}
	types := w.probesDue(n, w.pausedSet(ctx))
	for _, t := range types {
		if !w.limitProbe(t) {
			continue // the type's concurrency slots are all busy: the probe waits for one
		}
		m, ok, err := w.claimProbe(ctx, t)
		if err != nil {
			w.log.LogAttrs(ctx, slog.LevelWarn, "outbox circuit probe not claimed",
				slog.String("event_type", t), slog.String("error", explain(err).Error()))
		}
		if !ok {
			w.limitProbeUndo(t)
			w.probeClaimed(t, 0)
			continue
		}
		w.probeClaimed(t, m.id)
		w.startDispatch(m)
		used++
	}
	return used
}

// claimProbe claims one due message of eventType. ok is false when none is due.
func (w *Worker) claimProbe(ctx context.Context, eventType string) (m claimed, ok bool, err error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), claimTimeout)
	defer cancel()
	start := w.clock.Now()
	tx, err := w.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return claimed{}, false, fmt.Errorf("begin probe claim: %w", err)
	}
	defer func() {
		if err != nil || !ok {
			if rbErr := tx.Rollback(); rbErr != nil && !errors.Is(rbErr, sql.ErrTxDone) {
				err = errors.Join(err, fmt.Errorf("rollback probe claim: %w", rbErr))
			}
		}
	}()
	db := inlineExec{tx}
	rows, _, err := w.lockDue(ctx, db, 1, claimPos{}, []string{eventType})
	if err != nil || len(rows) == 0 {
		return claimed{}, false, err
	}
	r := rows[0]
	token := newToken()
	marked, err := q.MessageClaimMark(ctx, db, store.MessageClaimMarkParams{
		LeaseUs: w.cfg.StaleAfter.Microseconds(), ClaimToken: sql.NullString{String: token, Valid: true}, Ids: []int64{r.ID},
	})
	if err != nil {
		return claimed{}, false, fmt.Errorf("probe claim mark: %w", err)
	}
	if marked != 1 {
		return claimed{}, false, fmt.Errorf("probe claim mark: %d of 1 locked row changed", marked)
	}
	if err := tx.Commit(); err != nil {
		return claimed{}, false, fmt.Errorf("commit probe claim: %w", err)
	}
	w.cfg.Observer.Claimed(1, since(w.clock, start))
	return claimed{
		id: MessageID(r.ID), eventType: r.EventType, payload: store.Bytes(r.Payload), key: r.IdempotencyKey, headers: store.Text(r.Headers),
		orderingKey: r.OrderingKey.String, orderingSeq: r.OrderingSeq.Int64,
		attempt: int(r.Attempts) + 1, maxAttempts: int(r.MaxAttempts), enqueuedAt: r.CreatedAt, due: r.NextAttemptAt, token: token,
		claimStart: start,
	}, true, nil
}
