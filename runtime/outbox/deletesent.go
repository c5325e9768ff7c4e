// Policy.DeleteWhenSent: the result write of a success deletes its row instead of marking it
// SENT, for high-volume event types whose delivered rows nobody inspects. The write is fenced
// as MessageMarkSent is, an ordered message's queue entry goes as when it is marked SENT, and
// everything that counts results (the Observer, Drain) counts it as sent.

package outbox

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/outboxgen/outboxgen/runtime/internal/store"
)

// deletesWhenSent says the write of r, a success, deletes its row.
func (w *Worker) deletesWhenSent(r result) bool {
	rt, ok := w.router.lookup(r.eventType)
	return ok && rt.policy.DeleteWhenSent
}

// sentDeletes are the successes of a result batch whose rows are deleted, by claim token.
type sentDeletes struct {
	tokens []string
	ids    map[string][]int64
	// ordered marks the tokens with an ordered message among their rows.
	ordered map[string]bool
}

func (s *sentDeletes) add(r result) {
	if s.ids == nil {
		s.ids, s.ordered = map[string][]int64{}, map[string]bool{}
	}
	if _, ok := s.ids[r.token]; !ok {
		s.tokens = append(s.tokens, r.token)
	}
	s.ids[r.token] = append(s.ids[r.token], int64(r.id))
	if r.orderingKey != "" {
		s.ordered[r.token] = true
	}
}

// leave takes s's messages out of k: write releases their keys itself, before their rows go.
func (s *sentDeletes) leave(k keyRelease) {
	for _, ids := range s.ids {
		for _, id := range ids {
			k.refused(MessageID(id))
		}
	}
}

// statements is how many statements write runs: a claim's ordered rows take a lock, the
// release of their keys and the delete.
func (s *sentDeletes) statements() int {
	n := 0
	for _, tok := range s.tokens {
		n++
		if s.ordered[tok] {
			n += 2
		}
	}
	return n
}

// write deletes the rows on db, the batch's transaction when it has more than one statement.
// It returns how many it deleted, the results the fence refused (rows a newer claim owns) and
// how many ordering keys it released.
func (s *sentDeletes) write(ctx context.Context, db store.DBTX) (written int, refused []result, keys int, err error) {
	for _, tok := range s.tokens {
		ids := s.ids[tok]
		token := sql.NullString{String: tok, Valid: true}
		mine := ids
		if s.ordered[tok] {
			// The fence first, then the queue entries, whose delete joins the rows, then the rows.
			if mine, err = q.MessageDeleteSentLock(ctx, db, store.MessageDeleteSentLockParams{Ids: ids, ClaimToken: token}); err != nil {
				return 0, nil, 0, fmt.Errorf("delete sent: lock: %w", err)
			}
			if len(mine) > 0 {
				n, err := q.OrderingQueueDeleteSent(ctx, db, mine)
				if err != nil {
					return 0, nil, 0, fmt.Errorf("delete sent: release ordering keys: %w", err)
				}
				keys += int(n)
			}
		}
		var n int64
		if len(mine) > 0 {
			if n, err = q.MessageDeleteSent(ctx, db, store.MessageDeleteSentParams{Ids: mine, ClaimToken: token}); err != nil {
				return 0, nil, 0, fmt.Errorf("delete sent: %w", err)
			}
		}
		written += int(n)
		if int(n) == len(ids) {
			continue
		}
		// A row still there after the delete, or not locked by it, is a newer claim's.
		left, err := q.MessageTokensByIDs(ctx, db, ids)
		if err != nil {
			return 0, nil, 0, fmt.Errorf("delete sent: find refused writes: %w", err)
		}
		for _, row := range left {
			refused = append(refused, result{id: MessageID(row.ID), token: tok, outcome: OutcomeSent})
		}
	}
	return written, refused, keys, nil
}
