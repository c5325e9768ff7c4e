// InTx's hand-off. A message enqueued inside InTx, of an event type that a running Worker of
// this process handles, is inserted already claimed by that worker. Once InTx has committed,
// the worker dispatches it from memory, with no claim transaction and no wait for a poll.
// docs/design.md says why this is safe. The worker's slot is reserved at the enqueue, so a
// handed-off message never waits for one. A transaction may take so long that the handler
// could outlive the lease. The dispatch then gives the row back instead of running it.

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

// handoffTokenEvery is how long a worker's hand-off claim token stays in use. Results are
// written one UPDATE per token. A token shared by the messages handed off within this time
// thus lets one statement record them all. The token is only ever written on a row at its
// insert, so sharing it weakens no fence.
const handoffTokenEvery = time.Second

// handoffTx collects what Enqueue handed off inside one InTx transaction.
type handoffTx struct {
	db     *sql.DB   // InTx's pool, whose workers alone take the messages
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

// beginHandoff registers tx for hand-offs when a worker of this process runs on db. It
// returns nil when none does.
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

// enqueue inserts m claimed by a worker of db's that handles m.EventType and has a free slot,
// and records it in h. ok is false when no worker can take it. The caller then inserts it
// PENDING.
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
		w.limitUnhandoff(gen, m.EventType)
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
// handles eventType, and has room for its result and a slot free. A slot reserved by the
// claim in progress counts as free.
func (w *Worker) reserveHandoff(eventType string) (gen int, token string, ok bool) {
	if _, handles := w.router.lookup(eventType); !handles {
		return 0, "", false
	}
	if w.typePaused(eventType) || w.circuitOpen(eventType) { // left PENDING, for a claim once the pause ends or a probe closes the circuit
		return 0, "", false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	// The slots a claim in progress reserved count as free. The claim takes them all while it
	// runs, a millisecond or more. A hand-off that found none would fall back to a wake and a
	// claim, the cost the hand-off exists to avoid. If the claim fills them, the handed-off
	// message waits for a slot like a prefetched row. At most Concurrency of them wait.
	if !w.accepting || w.schemaHeld() || w.free+w.claiming <= 0 || w.sink.len() >= w.sinkCap {
		return 0, "", false
	}
	if !w.limitHandoffLocked(eventType) { // left PENDING, for a claim that honours the limits
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

// takeHandoff dispatches a handed-off message whose transaction committed. It returns false
// when the Run that reserved its slot has stopped accepting work. Its caller then gives the row
// back.
func (w *Worker) takeHandoff(gen int, m claimed) bool {
	w.mu.Lock()
	if !w.accepting || w.gen != gen {
		w.mu.Unlock()
		return false
	}
	// Under w.mu, since Run stops accepting under w.mu before it waits for the dispatches.
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
// the workers still need a wake. They do when some message of the transaction was not handed
// off. They do too when none was, since a message may have been enqueued through a wrapper of
// the *sql.Tx that handoffFor does not see.
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

// abandoned returns the slots of a transaction that rolled back, or whose end InTx cannot
// know because fn committed or rolled back itself. In the second case the rows, if committed,
// are given back so that any worker claims them at once.
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
		r.w.limitUnhandoff(r.gen, r.m.eventType)
		if maybeCommitted {
			giveBackHandoff(ctx, db, r, "InTx could not tell whether its transaction committed")
		}
	}
}

// giveBackHandoff makes a handed-off row that will not be dispatched here PENDING again, due
// at once, with its attempt returned. The write is fenced on its token, so it does nothing if
// the row does not exist. If the write fails, the row is reclaimed after its lease. It is then
// delivered late, not lost.
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
