// InTx's handoff: a message enqueued inside InTx, of an event type that a running Worker of
// this process handles, is inserted already claimed by that worker (PROCESSING under a claim
// token and a lease, as a claim would leave it) and, once InTx has committed, dispatched from
// memory: no claim transaction, no wait for a poll. Across processes the claim loop's adaptive
// polling does the job (claimLoop).
//
// What keeps it safe: until the commit the row is invisible, and after it, it is not PENDING,
// so no other claim takes it; the worker's slot is reserved at the enqueue, so a handed-off
// message never waits for one; if the process dies between the commit and the dispatch, the
// lease expires and the reclaim makes the row PENDING again, as for any claim; if the worker has
// stopped by the commit, InTx gives the row back (PENDING, due at once, attempt returned); if
// the transaction took so long that the handler could outlive the lease, the dispatch gives it
// back instead of running it (acquireAndHandle). Ordered and delayed messages never take this
// path: the first must wait for their key's turn, the second for their time.

package outbox

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/outboxgen/outboxgen/runtime/internal/store"
)

// handoffTokenEvery is how long a worker's handoff claim token stays in use. Results are
// written one UPDATE per token, so a token shared by the messages handed off within this time
// lets one statement record them all; the token is only ever written on a row at its insert,
// so sharing it weakens no fence.
const handoffTokenEvery = time.Second

// handoffTx collects what Enqueue handed off inside one InTx transaction.
type handoffTx struct {
	db     *sql.DB   // InTx's: only its workers take the messages
	reg    *registry // where db's workers are found
	mu     sync.Mutex
	rows   []handedOff
	others int // messages enqueued on the transaction without a handoff
}

type handedOff struct {
	w   *Worker
	gen int // the worker's Run that reserved the slot
	m   claimed
}

// beginHandoff registers tx for handoffs when a worker of this process runs on db; nil when
// none does.
func (r *registry) beginHandoff(db *sql.DB, tx *sql.Tx) *handoffTx {
	if !r.has(db) {
		return nil
	}
	h := &handoffTx{db: db, reg: r}
	r.txs.Store(tx, h)
	r.open.Add(1)
	return h
}

func (r *registry) endHandoff(tx *sql.Tx) {
	r.txs.Delete(tx)
	r.open.Add(-1)
}

// handoffFor is the collector of tx when tx is the transaction of a running InTx.
func (r *registry) handoffFor(tx DBTX) *handoffTx {
	if r.open.Load() == 0 {
		return nil
	}
	t, ok := tx.(*sql.Tx)
	if !ok {
		return nil
	}
	h, ok := r.txs.Load(t)
	if !ok {
		return nil
	}
	return h.(*handoffTx)
}

// enqueue inserts m claimed by a worker of db's that handles m.EventType and has a
// free slot, and records it in h. ok is false when no worker can take it: the caller then
// inserts it PENDING.
func (h *handoffTx) enqueue(ctx context.Context, tx *sql.Tx, m Message, hdr string) (id MessageID, ok bool, err error) {
	w, gen, token := h.reg.reserveHandoff(h.db, m.EventType)
	if w == nil {
		h.notHandedOff()
		return 0, false, nil
	}
	start := time.Now()
	n, err := q.MessageInsertClaimed(ctx, insertDB(tx, m, hdr), store.MessageInsertClaimedParams{
		EventType:      m.EventType,
		Payload:        m.Payload,
		IdempotencyKey: m.IdempotencyKey,
		Headers:        sql.NullString{String: hdr, Valid: hdr != ""},
		MaxAttempts:    int32(m.MaxAttempts),
		LeaseUs:        w.cfg.StaleAfter.Microseconds(),
		ClaimToken:     sql.NullString{String: token, Valid: true},
	})
	if err != nil {
		w.unreserveHandoff(gen)
		return 0, true, err
	}
	h.mu.Lock()
	h.rows = append(h.rows, handedOff{w: w, gen: gen, m: claimed{
		id: MessageID(n), eventType: m.EventType, payload: m.Payload, key: m.IdempotencyKey, headers: hdr,
		attempt: 1, maxAttempts: m.MaxAttempts, enqueuedAt: start.UTC(), token: token, claimStart: start,
	}})
	h.mu.Unlock()
	return MessageID(n), true, nil
}

// notHandedOff counts a message enqueued on the transaction that needs a claim.
func (h *handoffTx) notHandedOff() {
	h.mu.Lock()
	h.others++
	h.mu.Unlock()
}

// reserveHandoff finds a running worker on db that handles eventType and has a free dispatch
// slot, and takes the slot.
func (r *registry) reserveHandoff(db *sql.DB, eventType string) (w *Worker, gen int, token string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for cand := range r.workers[db] {
		if gen, token, ok := cand.reserveHandoff(eventType); ok {
			return cand, gen, token
		}
	}
	return nil, 0, ""
}

// reserveHandoff takes a dispatch slot for a handed-off message when this worker is running,
// handles eventType, and has a slot free (or reserved by the claim in progress) and room for
// its result.
func (w *Worker) reserveHandoff(eventType string) (gen int, token string, ok bool) {
	if _, handles := w.router.lookup(eventType); !handles {
		return 0, "", false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	// The slots a claim in progress reserved count as free: the claim takes them all while it
	// runs (a millisecond or more), and a handoff that found none would fall back to a wake and
	// a claim, the cost the handoff exists to avoid. If the claim fills them, the handed-off
	// message waits for a slot, at most Concurrency of them, like a prefetched row.
	if !w.accepting || w.schemaHeld() || w.free+w.claiming <= 0 || w.sink.len() >= w.sinkCap {
		return 0, "", false
	}
	w.free--
	if now := time.Now(); w.handoffToken == "" || now.Sub(w.handoffTokenAt) >= handoffTokenEvery {
		w.handoffToken, w.handoffTokenAt = newToken(), now
	}
	return w.gen, w.handoffToken, true
}

// unreserveHandoff returns a slot reserveHandoff took, unless it belonged to an earlier Run.
func (w *Worker) unreserveHandoff(gen int) {
	w.mu.Lock()
	ours := w.gen == gen
	w.mu.Unlock()
	if ours {
		w.release(1)
	}
}

// takeHandoff dispatches a handed-off message whose transaction committed; false when the Run
// that reserved its slot has stopped accepting work (its caller then gives the row back).
func (w *Worker) takeHandoff(gen int, m claimed) bool {
	w.mu.Lock()
	if !w.accepting || w.gen != gen {
		w.mu.Unlock()
		return false
	}
	// Under w.mu: Run stops accepting, under w.mu, before it waits for the dispatches.
	w.dispatch.Add(1)
	w.mu.Unlock()
	if o, ok := w.cfg.Observer.(HandoffObserver); ok {
		o.HandedOff(1)
	}
	w.runDispatch(m)
	w.testSignals.handedOff.Signal(m.id)
	return true
}

// committed dispatches the handed-off messages of a committed transaction. It reports whether
// the workers still need a wake: some message of the transaction was not handed off, or none
// was (it may have been enqueued through a wrapper of the *sql.Tx that handoffFor does not see).
func (h *handoffTx) committed(ctx context.Context, db *sql.DB) (wake bool) {
	h.mu.Lock()
	rows, others := h.rows, h.others
	h.mu.Unlock()
	for _, r := range rows {
		if !r.w.takeHandoff(r.gen, r.m) {
			wake = true
			giveBackHandoff(ctx, db, r, "its worker stopped before the transaction committed")
		}
	}
	return wake || others > 0 || len(rows) == 0
}

// abandoned returns the slots of a transaction that rolled back, or whose end InTx cannot know
// (fn committed or rolled back itself): then the rows, if committed, are given back so that any
// worker claims them at once.
func (h *handoffTx) abandoned(ctx context.Context, db *sql.DB, maybeCommitted bool) {
	if h == nil {
		return
	}
	h.mu.Lock()
	rows := h.rows
	h.rows = nil
	h.mu.Unlock()
	for _, r := range rows {
		r.w.unreserveHandoff(r.gen)
		if maybeCommitted {
			giveBackHandoff(ctx, db, r, "InTx could not tell whether its transaction committed")
		}
	}
}

// giveBackHandoff makes a handed-off row that will not be dispatched here PENDING again, due at
// once, with its attempt returned (fenced on its token: a no-op if the row does not exist). If
// that write fails, the row is reclaimed after its lease: delivered late, not lost.
func giveBackHandoff(ctx context.Context, db *sql.DB, r handedOff, why string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	_, err := q.MessageGiveBack(ctx, inlineExec{db}, store.MessageGiveBackParams{ID: int64(r.m.id), ClaimToken: sql.NullString{String: r.m.token, Valid: true}})
	attrs := []slog.Attr{slog.Int64("message_id", int64(r.m.id)), slog.String("event_type", r.m.eventType), slog.String("reason", why)}
	if err != nil {
		attrs = append(attrs, slog.String("error", fmt.Sprintf("give back: %v; the row is reclaimed after its lease", err)))
		r.w.log.LogAttrs(ctx, slog.LevelError, "outbox handed-off message not given back", attrs...)
		return
	}
	r.w.log.LogAttrs(ctx, slog.LevelWarn, "outbox handed-off message given back", attrs...)
}
