// Step 1 of the worker's cycle, the claim. One short READ COMMITTED transaction locks due rows
// of the router's event types and marks them PROCESSING under a fresh claim token.

package outbox

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/outboxgen/outboxgen/runtime/internal/store"
)

// claimed is one row this worker claimed.
type claimed struct {
	id          MessageID
	eventType   string
	payload     []byte
	key         string
	headers     string // the headers column, decoded at dispatch
	orderingKey string // "" for an unordered message
	orderingSeq int64
	attempt     int
	maxAttempts int
	enqueuedAt  time.Time
	due         time.Time // next_attempt_at when claimed
	token       string
	claimStart  time.Time // local time before the claim began, so the lease started after it
}

// claimAndDispatch claims up to n rows due at or after from, for n reserved slots, and starts
// their handlers. last is the latest position among the rows claimed. more is claim's.
func (w *Worker) claimAndDispatch(ctx context.Context, n int, from claimPos) (got int, last claimPos, more bool, err error) {
	probes := w.claimProbes(ctx, n) // circuit_probe.go: open circuits' probes take slots first
	rows, last, more, err := w.claimLimited(ctx, n-probes, from)
	w.release(n - probes - len(rows))
	// Rows claimed before an error are started all the same: they are PROCESSING already.
	for _, m := range rows {
		w.startDispatch(m)
	}
	return len(rows), last, more, err
}

// lastPos is the latest position among rows.
func lastPos(rows []claimed) (last claimPos) {
	for _, m := range rows {
		if p := (claimPos{due: m.due, id: int64(m.id)}); p.after(last) {
			last = p
		}
	}
	return last
}

// claim is step 1. One short READ COMMITTED transaction locks up to n due rows of this
// router's types after from and marks them PROCESSING under a fresh token. lockDue says how it
// picks them. more says due rows were left past the last window.
//
// A claim that has begun finishes even if Run's ctx is cancelled meanwhile, since it takes
// milliseconds. Cancelling mid-COMMIT could leave rows claimed that nobody dispatches until
// their lease ends. The loop starts no new claim after cancellation.
func (w *Worker) claim(ctx context.Context, n int, from claimPos) (_ []claimed, more bool, err error) {
	return w.claimOf(ctx, n, from, w.circuitClosedTypes(w.claimTypes(ctx)), nil)
}

// claimOf is claim of the given types. gate, when not nil, may lower n inside the claim's
// transaction and hears how many rows the claim took before it commits.
func (w *Worker) claimOf(ctx context.Context, n int, from claimPos, types []string, gate claimGate) (_ []claimed, more bool, err error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), claimTimeout)
	defer cancel()
	start := w.clock.Now()
	// The read of the pauses may take a moment, in which a table can turn out to need a newer
	// outboxgen, so the loop's check is made again.
	if n <= 0 || len(types) == 0 || w.schemaHeld() { // every type is paused or open, or claims are held
		w.cfg.Observer.Claimed(0, since(w.clock, start))
		return nil, false, nil
	}
	tx, err := w.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return nil, false, fmt.Errorf("begin claim: %w", err)
	}
	defer func() {
		if err != nil {
			if rbErr := tx.Rollback(); rbErr != nil && !errors.Is(rbErr, sql.ErrTxDone) {
				err = errors.Join(err, fmt.Errorf("rollback claim: %w", rbErr))
			}
		}
	}()
	db := inlineExec{tx}
	if gate != nil {
		if n, err = gate.admit(ctx, db, n); err != nil {
			return nil, false, err
		}
	}
	var rows []store.MessageClaimLockIDsRow
	if n > 0 {
		rows, more, err = w.lockDue(ctx, db, n, from, types)
	}
	if err != nil {
		return nil, false, err
	}
	if w.afterClaimSelect != nil {
		w.afterClaimSelect()
	}
	if len(rows) == 0 {
		// Nothing is locked, so ending the transaction either way releases nothing.
		if err := tx.Commit(); err != nil {
			return nil, false, fmt.Errorf("commit empty claim: %w", err)
		}
		w.cfg.Observer.Claimed(0, since(w.clock, start))
		return nil, more, nil
	}
	token := newToken()
	ids := make([]int64, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	marked, err := q.MessageClaimMark(ctx, db, store.MessageClaimMarkParams{
		LeaseUs: w.cfg.StaleAfter.Microseconds(), ClaimToken: sql.NullString{String: token, Valid: true}, Ids: ids,
	})
	if err != nil {
		return nil, false, fmt.Errorf("claim mark: %w", err)
	}
	if marked != int64(len(rows)) {
		// The rows are locked by this transaction, so this cannot happen short of a bug.
		return nil, false, fmt.Errorf("claim mark: %d of %d locked rows changed", marked, len(rows))
	}
	if gate != nil {
		if err := gate.took(ctx, db, len(rows)); err != nil {
			return nil, false, err
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, false, fmt.Errorf("commit claim: %w", err)
	}
	out := make([]claimed, len(rows))
	for i, r := range rows {
		out[i] = claimed{
			id: MessageID(r.ID), eventType: r.EventType, payload: store.Bytes(r.Payload), key: r.IdempotencyKey, headers: store.Text(r.Headers),
			orderingKey: r.OrderingKey.String, orderingSeq: r.OrderingSeq.Int64,
			attempt: int(r.Attempts) + 1, maxAttempts: int(r.MaxAttempts), enqueuedAt: r.CreatedAt, due: r.NextAttemptAt, token: token,
			claimStart: start,
		}
	}
	d := since(w.clock, start)
	w.cfg.Observer.Claimed(len(out), d)
	w.log.LogAttrs(ctx, slog.LevelDebug, "outbox claimed", slog.Int("claimed", len(out)),
		slog.String("claim_token", token), slog.Duration("took", d))
	return out, more, nil
}

// lockDue locks up to n due rows of the given types after from, inside the claim's
// transaction. It reads the ids of the first 2n due rows in index order without locking. It
// then locks the first n of them by primary key with SKIP LOCKED, so claims never wait for
// each other. When other claims hold some, it takes the rest of the window, then the next
// window, up to claimRounds of them. When every window was held, it falls back to a SKIP
// LOCKED scan of the claim index. more says due rows were left past the last window.
func (w *Worker) lockDue(ctx context.Context, db store.DBTX, n int, from claimPos, types []string) (rows []store.MessageClaimLockIDsRow, more bool, err error) {
	if from.due.IsZero() {
		from.due = claimFromStart
	}
	have := map[int64]bool{}
	lock := func(ids []int64, limit int) error {
		locked, err := q.MessageClaimLockIDs(ctx, db, store.MessageClaimLockIDsParams{Ids: ids, EventTypes: types, Limit: int32(limit)})
		if err != nil {
			return fmt.Errorf("claim lock: %w", err)
		}
		for _, r := range locked {
			have[r.ID] = true
			rows = append(rows, r)
		}
		return nil
	}
	after := from
	for round := 0; round < claimRounds && len(rows) < n; round++ {
		cands, err := q.MessageClaimCandidates(ctx, db, store.MessageClaimCandidatesParams{
			AfterDue: after.due, AfterID: after.id, EventTypes: types, Limit: int32(2 * n)})
		if err != nil {
			return nil, false, fmt.Errorf("claim candidates: %w", err)
		}
		ids := make([]int64, 0, len(cands))
		for _, c := range cands {
			if !have[c.ID] {
				ids = append(ids, c.ID)
			}
		}
		// First come exactly the rows still needed, in due order, so the claim takes the
		// oldest. If others held some of them, the rest of the window follows, lowest ids
		// first. A row due earlier with a higher id can thus fall behind the seek until the
		// next rescan.
		need := min(n-len(rows), len(ids))
		if need > 0 {
			if err := lock(ids[:need], need); err != nil {
				return nil, false, err
			}
		}
		if len(rows) < n && len(ids) > need {
			if err := lock(ids[need:], n-len(rows)); err != nil {
				return nil, false, err
			}
		}
		// A full window means more due rows lie past it.
		more = len(cands) == 2*n
		if !more {
			break
		}
		last := cands[len(cands)-1]
		after = claimPos{due: last.NextAttemptAt, id: last.ID}
	}
	if len(rows) < n && more {
		// Other claims held every window. A hung worker may have left a claim open, or many
		// workers claim at once. The index scan skips held rows wherever they are. It returns
		// the rows this claim locked too.
		w.claimFallbacks.Add(1)
		extra, err := q.MessageClaimSelect(ctx, db, store.MessageClaimSelectParams{
			AfterDue: from.due, AfterID: from.id, EventTypes: types, Limit: int32(n + len(rows))})
		if err != nil {
			return nil, false, fmt.Errorf("claim select: %w", err)
		}
		for _, r := range extra {
			if len(rows) < n && !have[r.ID] {
				have[r.ID] = true
				rows = append(rows, store.MessageClaimLockIDsRow(r))
			}
		}
	}
	return rows, more, nil
}

// claimPos is a position in the claim index's order, by next_attempt_at and then id.
type claimPos struct {
	due time.Time
	id  int64
}

func (p claimPos) after(o claimPos) bool {
	return p.due.After(o.due) || (p.due.Equal(o.due) && p.id > o.id)
}

// claimFromStart is before every next_attempt_at, since DATETIME starts at year 1000. The
// driver would send the zero time.Time as '0000-00-00', which strict modes reject.
var claimFromStart = time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)

// newToken returns 32 hex characters, the size of claim_token.
func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error since Go 1.24.
	return hex.EncodeToString(b[:])
}
