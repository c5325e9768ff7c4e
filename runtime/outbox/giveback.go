// Shutdown's give-back: rows this worker claimed but whose handlers have not started are made
// PENDING again the moment Run's context ends, so that another worker delivers them at once,
// instead of being started one by one as running handlers finish, which kept a stopping
// worker delivering (and holding the rows) for up to ShutdownTimeout.

package outbox

import (
	"context"
	"database/sql"
	"log/slog"
	"time"

	"github.com/outboxgen/outboxgen/runtime/internal/store"
)

// dispatchRef names one dispatch of a row: the same row may come back under a newer claim.
type dispatchRef struct {
	id    MessageID
	token string
}

// queueLocked records m as claimed and not yet started. It reports false once Run has taken
// the unstarted rows for its give-back: such a row, handed off in that instant, is given back
// through the result sink instead. w.mu is held.
func (w *Worker) queueLocked(m claimed) bool {
	if w.unstarted == nil {
		return false
	}
	w.unstarted[dispatchRef{m.id, m.token}] = m
	return true
}

// startLocked decides, against Run's give-back, whether m's handler may start: false once Run's
// context has ended, and m is then left to the give-back (queued) or given back by the caller.
// w.mu is held.
func (w *Worker) startLocked(m claimed, stop <-chan struct{}) bool {
	select {
	case <-stop:
		return false
	default:
	}
	delete(w.unstarted, dispatchRef{m.id, m.token})
	return true
}

// takeUnstartedLocked ends the queue of unstarted rows and returns them: from now on no
// handler starts in this Run (its context has ended). w.mu is held.
func (w *Worker) takeUnstartedLocked() []claimed {
	rows := make([]claimed, 0, len(w.unstarted))
	for _, m := range w.unstarted {
		rows = append(rows, m)
	}
	w.unstarted = nil
	return rows
}

// giveBackUnstarted makes rows PENDING again, due at once, with their claims' attempts given
// back: one fenced statement per claim, tried a few times until ctx ends. Rows it cannot write
// stay PROCESSING and are reclaimed after their lease, delivered later but not lost.
func (w *Worker) giveBackUnstarted(ctx context.Context, rows []claimed) {
	if len(rows) == 0 {
		return
	}
	var tokens []string
	ids := map[string][]int64{}
	for _, m := range rows {
		if _, ok := ids[m.token]; !ok {
			tokens = append(tokens, m.token)
		}
		ids[m.token] = append(ids[m.token], int64(m.id))
	}
	var given int64
	var err error
	pause := 50 * time.Millisecond
	for len(tokens) > 0 {
		tok := tokens[0]
		wctx, cancel := context.WithTimeout(ctx, writeTimeout)
		var n int64
		// Inlined arguments: one round trip whatever the DSN (see inlineExec).
		n, err = q.MessageGiveBackClaim(wctx, inlineExec{w.db}, store.MessageGiveBackClaimParams{
			ClaimToken: sql.NullString{String: tok, Valid: true}, Ids: ids[tok]})
		cancel()
		if err == nil {
			given += n
			tokens = tokens[1:]
			continue
		}
		if ctx.Err() != nil || pause > time.Second {
			break
		}
		select {
		case <-time.After(pause):
		case <-ctx.Done():
		}
		pause *= 2
	}
	if err != nil && len(tokens) > 0 {
		w.log.LogAttrs(ctx, slog.LevelError, "outbox give-back failed; the rows will be reclaimed after their lease and delivered again",
			slog.Int("unstarted", len(rows)), slog.Int64("given_back", given), slog.String("error", err.Error()))
		return
	}
	// Fewer than len(rows): the rest were reclaimed by a newer claim, whose they are now.
	w.log.LogAttrs(ctx, slog.LevelInfo, "outbox unstarted messages given back",
		slog.Int("unstarted", len(rows)), slog.Int64("given_back", given))
}
