// Step 3 of the worker's cycle, the record. Handler results wait in a sink and are written in
// batches, one transaction per batch. Each write is fenced on the row's claim token.

package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/outboxgen/outboxgen/runtime/internal/store"
)

// resultSink collects results between handlers and the flusher.
type resultSink struct {
	mu      sync.Mutex
	buf     []result
	ordered int // results in buf that release an ordering key when written
	closed  bool
	notify  chan struct{}
}

func newResultSink() *resultSink { return &resultSink{notify: make(chan struct{}, 1)} }

// put queues r. It returns false when the sink is closed because Run has returned.
func (s *resultSink) put(r result) bool {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return false
	}
	s.buf = append(s.buf, r)
	if r.releasesKey() {
		s.ordered++
	}
	s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
	return true
}

func (s *resultSink) take() (batch []result, closed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	batch, s.buf, s.ordered = s.buf, nil, 0
	return batch, s.closed
}

func (s *resultSink) len() int {
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.buf)
}

func (s *resultSink) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

func (s *resultSink) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// flushLoop is step 3. It writes results in batches, one transaction per batch. A batch is
// written once BatchSize results wait, or flushLinger after the first of them arrived. Under
// load, one commit thus records many claims' results, since commits bound throughput. No
// result waits much longer than flushLinger for its write.
func (w *Worker) flushLoop(ctx context.Context, sink *resultSink) {
	linger := time.NewTimer(flushLinger)
	linger.Stop()
	for {
		<-sink.notify
		linger.Reset(lingerFor(sink.holdsOrdered()))
	gather:
		for sink.len() < w.cfg.BatchSize && !sink.isClosed() {
			select {
			case <-sink.notify:
			case <-linger.C:
				break gather
			}
		}
		linger.Stop()
		batch, closed := sink.take()
		if len(batch) > 0 {
			w.signalFreed() // backlog room for the claim loop
			w.writeResults(ctx, batch)
			w.testSignals.flushed.Signal(len(batch))
		}
		if closed {
			// Results put before close are in batch. put refuses the rest.
			if rest, _ := sink.take(); len(rest) > 0 {
				w.writeResults(ctx, rest)
				w.testSignals.flushed.Signal(len(rest))
			}
			return
		}
	}
}

// writeResults records a batch with fenced writes in one transaction. A failed write is
// retried with backoff for up to half the lease, and the fence makes a repeat harmless. A
// database hiccup of seconds thus does not turn delivered messages into redeliveries after
// their lease. Meanwhile the full result sink stops new claims. Once Run is shutting down, it
// gives up after a few quick tries, so Run can return. A refused write means the row was
// reclaimed and is no longer this claim's. Refused writes are logged and counted, and they
// change nothing.
func (w *Worker) writeResults(ctx context.Context, batch []result) (written, refused int) {
	return w.writeResultsUntil(ctx, batch, w.clock.Now().Add(w.cfg.StaleAfter/2), func() bool {
		w.mu.Lock()
		sink := w.sink
		w.mu.Unlock()
		return sink == nil || sink.isClosed()
	})
}

func (w *Worker) writeResultsUntil(ctx context.Context, batch []result, deadline time.Time, shuttingDown func() bool) (written, refused int) {
	var err error
	pause := 50 * time.Millisecond
	for try := 1; ; try++ {
		if try == 1 {
			wctx, cancel := context.WithTimeout(ctx, writeTimeout)
			written, refused, err = w.writeResultsTx(wctx, batch)
			cancel()
		} else {
			// After a failure, the rows are written one at a time. One row may make a write
			// fail, with a value its column refuses. It must not take the other rows' results
			// with it. The rows written stay written while the rest are tried again.
			var n, r int
			n, r, batch, err = w.writeEach(ctx, batch)
			written, refused = written+n, refused+r
		}
		if err == nil {
			if try > 1 {
				w.log.LogAttrs(ctx, slog.LevelInfo, "outbox result write succeeded after retries",
					slog.Int("results", written+refused), slog.Int("try", try))
			}
			return written, refused
		}
		if writeGivesUp(ctx.Err() != nil, w.clock.Now(), deadline, pause, try, shuttingDown) {
			break
		}
		w.log.LogAttrs(ctx, slog.LevelWarn, "outbox result write failed; retrying",
			slog.Int("results", len(batch)), slog.Int("try", try), slog.Duration("retry_in", pause), slog.String("error", err.Error()))
		select {
		case <-time.After(pause):
		case <-ctx.Done():
		}
		pause = nextWritePause(pause)
	}
	// The rows stay PROCESSING and are reclaimed after their lease. They are delivered again,
	// not lost.
	w.log.LogAttrs(ctx, slog.LevelError, "outbox result write failed; the rows will be reclaimed after their lease and delivered again",
		slog.Int("results", len(batch)), slog.String("error", err.Error()))
	return written, refused
}

// writeEach writes each result in a statement of its own and returns the results whose write
// failed, with the last error.
func (w *Worker) writeEach(ctx context.Context, batch []result) (written, refused int, failed []result, err error) {
	for _, r := range batch {
		if ctx.Err() != nil {
			return written, refused, append(failed, r), ctx.Err()
		}
		wctx, cancel := context.WithTimeout(ctx, writeTimeout)
		n, ref, werr := w.writeResultsTx(wctx, []result{r})
		cancel()
		if werr != nil {
			err = werr
			failed = append(failed, r)
			continue
		}
		written, refused = written+n, refused+ref
	}
	return written, refused, failed, err
}

func (w *Worker) writeResultsTx(ctx context.Context, batch []result) (written, refused int, err error) {
	releasedKeys := 0
	defer func() {
		// A key's next message became claimable, so claim it now rather than at the next
		// poll. A key's throughput is one message per round of claim, handler and record.
		if err == nil && releasedKeys > 0 {
			w.Wake()
		}
	}()
	// Id order keeps concurrent writers' lock order consistent.
	sort.Slice(batch, func(i, j int) bool { return batch[i].id < batch[j].id })
	sent := map[string][]int64{} // successes by claim token, for one UPDATE per claim
	var tokens []string
	others := 0
	var dels sentDeletes // successes whose rows go (deletesent.go)
	for _, r := range batch {
		if r.outcome != OutcomeSent {
			others++
			continue
		}
		if w.deletesWhenSent(r) {
			dels.add(r)
			continue
		}
		if _, ok := sent[r.token]; !ok {
			tokens = append(tokens, r.token)
		}
		sent[r.token] = append(sent[r.token], int64(r.id))
	}

	// One statement needs no transaction, and autocommit saves the BEGIN and COMMIT round
	// trips. Several statements share one, so a batch costs one commit. Fenced updates by
	// primary key lock only their own rows, so the default isolation is fine. Arguments are
	// inlined, so each statement is one round trip whatever the DSN.
	var db store.DBTX = inlineExec{w.db}
	var tx *sql.Tx
	release := newKeyRelease(batch)
	dels.leave(release)
	cancels := cancelReleases(batch)
	if len(tokens)+others+release.count+len(cancels)+dels.statements() > 1 {
		tx, err = w.db.BeginTx(ctx, nil)
		if err != nil {
			return 0, 0, fmt.Errorf("begin: %w", err)
		}
		db = inlineExec{tx}
		defer func() {
			if err != nil {
				if rbErr := tx.Rollback(); rbErr != nil && !errors.Is(rbErr, sql.ErrTxDone) {
					err = errors.Join(err, fmt.Errorf("rollback: %w", rbErr))
				}
			}
		}()
	}

	var refusedRes []result
	for _, tok := range tokens {
		ids := sent[tok]
		n, err := q.MessageMarkSent(ctx, db, store.MessageMarkSentParams{ClaimToken: sql.NullString{String: tok, Valid: true}, Ids: ids})
		if err != nil {
			return 0, 0, fmt.Errorf("mark sent: %w", err)
		}
		written += int(n)
		if int(n) != len(ids) {
			// Which ones? Rows this statement changed now carry SENT and our token.
			rows, err := q.MessageTokensByIDs(ctx, db, ids)
			if err != nil {
				return 0, 0, fmt.Errorf("find refused writes: %w", err)
			}
			for _, row := range rows {
				if row.Status != store.OutboxMessagesStatusSENT || row.ClaimToken.String != tok {
					refusedRes = append(refusedRes, result{id: MessageID(row.ID), token: tok, outcome: OutcomeSent})
					release.refused(MessageID(row.ID))
				}
			}
		}
	}
	if releasedKeys, err = release.write(ctx, db, batch); err != nil {
		return 0, 0, err
	}
	deleted, deleteRefused, deleteKeys, err := dels.write(ctx, db)
	if err != nil {
		return 0, 0, err
	}
	written, releasedKeys = written+deleted, releasedKeys+deleteKeys
	refusedRes = append(refusedRes, deleteRefused...)
	for _, r := range batch {
		var n int64
		var err error
		tok := sql.NullString{String: r.token, Valid: true}
		msg := sql.NullString{String: r.lastError, Valid: true}
		switch r.outcome {
		case OutcomeSent:
			continue
		case OutcomeRetried:
			if r.givenBack {
				n, err = q.MessageGiveBack(ctx, db, store.MessageGiveBackParams{ID: int64(r.id), ClaimToken: tok})
				break
			}
			n, err = q.MessageMarkRetry(ctx, db, store.MessageMarkRetryParams{DelayUs: r.delay.Microseconds(), LastError: msg, ID: int64(r.id), ClaimToken: tok})
		case OutcomeFailed:
			n, err = q.MessageMarkFailed(ctx, db, store.MessageMarkFailedParams{LastError: msg, ID: int64(r.id), ClaimToken: tok})
		}
		if err != nil {
			return 0, 0, fmt.Errorf("mark %s: %w", r.outcome, err)
		}
		if n == 1 {
			written++
		} else {
			refusedRes = append(refusedRes, r)
		}
	}
	if err := releaseCancelled(ctx, db, cancels); err != nil {
		return 0, 0, err
	}
	if tx != nil {
		if err := tx.Commit(); err != nil {
			return 0, 0, fmt.Errorf("commit: %w", err)
		}
	}
	for _, r := range refusedRes {
		w.log.LogAttrs(ctx, slog.LevelWarn, "outbox result refused by the fence: the claim was reclaimed and the row belongs to a newer claim",
			slog.Int64("message_id", int64(r.id)), slog.String("claim_token", r.token), slog.String("outcome", string(r.outcome)))
	}
	return written, len(refusedRes), nil
}
