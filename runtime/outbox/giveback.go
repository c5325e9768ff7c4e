// Shutdown's give-back. Rows this worker claimed but whose handlers have not started become
// PENDING again the moment Run's context ends, so that another worker delivers them at once.
// A stopping worker thus holds no row it will not start.

package outbox

import (
	"context"
	"database/sql"
	"log/slog"
	"time"

	"github.com/outboxgen/outboxgen/runtime/internal/store"
)

// dispatchRef names one dispatch of a row. The same row may come back under a newer claim.
type dispatchRef struct {
	id    MessageID
	token string
}

// queueLocked records m as claimed and not yet started. It reports false once Run has taken
// the unstarted rows for its give-back. A row handed off in that instant is given back through
// the result sink instead. w.mu is held.
func (w *Worker) queueLocked(m claimed) bool {
	if w.unstarted == nil {
		return false
	}
	w.unstarted[dispatchRef{m.id, m.token}] = m
	return true
}

// startLocked decides, against Run's give-back, whether m's handler may start. It returns
// false once Run's context has ended. A queued m is then left to the give-back, and any other
// m is given back by the caller. w.mu is held.
func (w *Worker) startLocked(m claimed, stop <-chan struct{}) bool {
	select {
	case <-stop:
		return false
	default:
	}
	delete(w.unstarted, dispatchRef{m.id, m.token})
	return true
}

// takeUnstartedLocked ends the queue of unstarted rows and returns them. No handler starts in
// this Run after it, since its context has ended. w.mu is held.
func (w *Worker) takeUnstartedLocked() []claimed {
	rows := make([]claimed, 0, len(w.unstarted))
	for _, m := range w.unstarted {
		rows = append(rows, m)
	}
	w.unstarted = nil
	return rows
}

// giveBackUnstarted makes rows PENDING again, due at once, with their claims' attempts given
// back. It runs one fenced statement per claim, tried a few times until ctx ends. Rows it
// cannot write stay PROCESSING and are reclaimed after their lease. They are delivered later
// but not lost.
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
		// Arguments are inlined, so the statement is one round trip whatever the DSN.
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
	// Fewer than len(rows) means a newer claim reclaimed the rest, and they are its rows.
	w.log.LogAttrs(ctx, slog.LevelInfo, "outbox unstarted messages given back",
		slog.Int("unstarted", len(rows)), slog.Int64("given_back", given))
}
