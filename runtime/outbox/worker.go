// The Worker and the loop that ties its cycle together. Run starts the result flusher in
// results.go and the maintenance loop in maintain.go. claimLoop reserves dispatch slots,
// claims rows in claim.go and starts their handlers in dispatch.go.

package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outboxgen/outboxgen/runtime/incident"
)

// Worker claims due messages of its router's event types, dispatches them to their handlers
// and records the results. The package documentation describes the cycle. Several workers, in
// one process or many, share the table safely.
type Worker struct {
	db     *sql.DB
	router *Router
	cfg    Config
	types  []string
	log    *slog.Logger
	// logIncidents says to log incidents at error level too. A custom Reporter may not.
	logIncidents bool

	wake    chan struct{}
	running atomic.Bool

	mu       sync.Mutex
	free     int                     // free dispatch slots: Concurrency - claimed rows not yet finished (negative while rows are prefetched)
	avgTook  float64                 // running average of handler durations in ns, 0 until one finishes
	sem      chan struct{}           // dispatch slots of this Run: a handler runs while it holds one
	inflight map[MessageID]*inflight // handlers running now
	freed    chan struct{}           // signalled when slots or backlog room free up
	sink     *resultSink             // results waiting for the flusher, nil outside Run
	sinkCap  int                     // most results allowed to wait for a write
	hctx     context.Context         // parent of handler contexts, which outlives Run's ctx
	gen      int                     // counts Runs: a handler abandoned by an earlier Run frees no slot of this one
	dispatch sync.WaitGroup          // running dispatch goroutines
	// accepting says Run is claiming, so InTx may hand messages off to it. It turns false when
	// the claim loop ends, before Run waits for the dispatches.
	accepting      bool
	claiming       int       // slots reserved by the claim in progress, which a handoff may borrow
	handoffToken   string    // the claim token of handed-off rows (handoffTokenEvery)
	handoffTokenAt time.Time // when handoffToken was made

	// The shutdown's give-back, in giveback.go. No handler starts once stop, Run's ctx.Done,
	// is closed. unstarted holds the claimed rows whose handlers have not started. It is nil
	// once Run has taken them to give them back.
	stop      <-chan struct{}
	unstarted map[dispatchRef]claimed

	// schema stops claims while a table needs a newer outboxgen.
	schema schemaGate
	// pauses holds the event types paused fleet-wide, which claims and hand-offs leave alone.
	pauses pauseView
	// circuits holds the event types whose handlers keep failing (circuit.go).
	circuits circuits
	// lagClock is the database clock's offset, for a LagObserver (circuit_lag.go).
	lagClock lagClock
	// limits holds the concurrency and rate limits' bookkeeping, under mu.
	limits limitState

	// Test seams.
	testSignals      workerTestSignals
	clock            clock               // realClock outside tests
	jitter           func(n int64) int64 // uniform in [0, n]
	afterClaimSelect func()              // inside the claim transaction, after the SELECT
	claimFallbacks   atomic.Int64        // claims that fell back to the index scan
	claims           atomic.Int64        // claim transactions started
}

type inflight struct {
	eventType string
	attempt   int
	token     string
	started   time.Time
}

// NewWorker returns a Worker for the event types r handles at this moment. It checks cfg, and
// its errors name the field at fault. It checks that every event timeout of r is shorter than
// StaleAfter, and its errors name the event. It checks the connection, whose DSN must set
// parseTime=true and use loc=UTC or a zone whose offset is zero at every instant. It is
// NewWorkerContext with context.Background().
func NewWorker(db *sql.DB, r *Router, cfg Config) (*Worker, error) {
	return NewWorkerContext(context.Background(), db, r, cfg)
}

// NewWorkerContext is NewWorker whose database checks run under ctx. When ctx ends first, it
// returns an error that wraps ctx's. The checks take at most 10 seconds whatever ctx allows.
func NewWorkerContext(ctx context.Context, db *sql.DB, r *Router, cfg Config) (*Worker, error) {
	if db == nil {
		return nil, errors.New("outbox: NewWorker: nil db")
	}
	if r == nil || len(r.routes) == 0 {
		return nil, errors.New("outbox: NewWorker: the router handles no event type")
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	// The default Reporter already writes each incident as an error line on Logger.
	logIncidents := cfg.Reporter != nil
	cfg = cfg.withDefaults()
	r = r.snapshot()
	types := r.EventTypes()
	for _, t := range types {
		rt, _ := r.lookup(t)
		p := rt.policy
		if err := validatePolicy(t, rt.given, p); err != nil {
			return nil, fmt.Errorf("outbox: NewWorker: %w", err)
		}
		if p.Timeout >= cfg.StaleAfter {
			return nil, fmt.Errorf("outbox: NewWorker: event %q: timeout %s is not shorter than Config.StaleAfter %s (a slow handler would be reclaimed and run twice)", t, p.Timeout, cfg.StaleAfter)
		}
	}
	if err := r.wrapHandlers(cfg.Middleware); err != nil {
		return nil, fmt.Errorf("outbox: NewWorker: %w", err)
	}
	if err := r.setInboxExpiry(cfg); err != nil {
		return nil, fmt.Errorf("outbox: NewWorker: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := checkClock(ctx, db); err != nil {
		return nil, fmt.Errorf("outbox: NewWorker: %w", err)
	}
	if err := checkBinlog(ctx, db); err != nil {
		return nil, fmt.Errorf("outbox: NewWorker: %w", err)
	}
	if err := checkSchemaCompat(ctx, db); err != nil {
		return nil, fmt.Errorf("outbox: NewWorker: %w", err)
	}
	// Without the tables every poll would log "doesn't exist" forever. Say what to do once.
	if _, err := q.SchemaProbe(ctx, db); err != nil {
		return nil, fmt.Errorf("outbox: NewWorker: %w", explain(err))
	}
	if _, err := q.PauseProbe(ctx, db); err != nil {
		return nil, fmt.Errorf("outbox: NewWorker: %w", explain(err))
	}
	if err := probeRateLimits(ctx, db, r); err != nil {
		return nil, fmt.Errorf("outbox: NewWorker: %w", err)
	}
	w := &Worker{
		db: db, router: r, cfg: cfg, types: types, log: cfg.Logger, logIncidents: logIncidents,
		wake:     make(chan struct{}, 1),
		freed:    make(chan struct{}, 1),
		inflight: map[MessageID]*inflight{},
		clock:    realClock{},
		jitter:   func(n int64) int64 { return mrand.Int64N(n + 1) },
	}
	return w, nil
}

// Wake makes a waiting worker claim at once instead of at its next poll. It never blocks.
// InTx calls it after commit. A caller that commits its own transaction calls it after Commit.
func (w *Worker) Wake() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *Worker) signalFreed() {
	select {
	case w.freed <- struct{}{}:
	default:
	}
}

// Run claims, dispatches and records until ctx is done, then shuts down.
//   - It stops claiming at once.
//   - Claimed rows whose handlers have not started are given back at once, PENDING and due
//     now, with their attempt not counted. Other workers deliver them.
//   - In-flight handlers keep their contexts until their event timeout or until
//     ShutdownTimeout passes, when their contexts are cancelled.
//   - The results of those that return are recorded, and Run returns nil.
//
// A handler that ignores its context is left running, because Go cannot stop it. Its row is
// reclaimed after its lease.
//
// Database errors do not end Run. While the database is unreachable, each failed claim,
// reclaim and stuck check is logged at error level. It is tried again at the next
// PollInterval or ReclaimInterval. Claims resume by themselves once the database answers,
// since database/sql opens new connections. A result that cannot be written is retried for up
// to half of StaleAfter and then given up. Its row is reclaimed after its lease and delivered
// again.
//
// Run returns an error only when the Worker is already running. Otherwise it returns nil, and
// only after ctx is done. It needs no restart loop.
func (w *Worker) Run(ctx context.Context) error {
	if !w.running.CompareAndSwap(false, true) {
		return errors.New("outbox: Worker.Run: already running")
	}
	defer w.running.Store(false)
	running.add(w.db, w)
	defer running.remove(w.db, w)

	// Handler contexts survive Run's ctx until the shutdown deadline cancels them. They have
	// their own timeout. Result writes must survive Run's ctx too.
	hctx, hardStop := context.WithCancel(context.WithoutCancel(ctx))
	defer hardStop()
	// Cancelled only when the shutdown deadline has passed and results are still being
	// written, to a database that does not answer. Run must return by then. The rows are
	// reclaimed later.
	wctx, stopWrites := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWrites()

	sink := newResultSink()
	w.mu.Lock()
	w.gen++
	w.free = w.cfg.Concurrency
	w.sem = make(chan struct{}, w.cfg.Concurrency)
	w.sink = sink
	w.sinkCap = 4 * max(w.cfg.BatchSize, w.cfg.Concurrency)
	w.hctx = hctx
	w.accepting = true
	w.stop = ctx.Done()
	w.unstarted = map[dispatchRef]claimed{}
	w.resetLimitsLocked()
	w.mu.Unlock()

	flushDone := make(chan struct{})
	go func() {
		defer close(flushDone)
		w.flushLoop(wctx, sink)
	}()
	maintDone := make(chan struct{})
	go func() {
		defer close(maintDone)
		w.maintainLoop(ctx)
	}()

	w.log.LogAttrs(ctx, slog.LevelInfo, "outbox worker started",
		slog.Any("event_types", w.types), slog.Int("concurrency", w.cfg.Concurrency),
		slog.Duration("stale_after", w.cfg.StaleAfter))
	w.claimLoop(ctx)
	stopBy := w.clock.Now().Add(w.cfg.ShutdownTimeout)
	w.mu.Lock()
	w.accepting = false
	unstarted := w.takeUnstartedLocked()
	w.mu.Unlock()
	// Shutdown gives back the rows no handler has started, at once. Other workers deliver
	// them while this one waits only for the handlers already running.
	gctx, cancelGive := context.WithDeadline(wctx, stopBy)
	w.giveBackUnstarted(gctx, unstarted)
	cancelGive()
	<-maintDone

	// Then wait for in-flight handlers, then cancel them, then give up on the hung.
	done := make(chan struct{})
	go func() {
		w.dispatch.Wait()
		close(done)
	}()
	deadline := time.NewTimer(until(w.clock, stopBy))
	defer deadline.Stop()
	select {
	case <-done:
	case <-deadline.C:
		hardStop()
		select {
		case <-done:
		case <-time.After(shutdownGrace):
			w.reportAbandoned(wctx)
		}
	}
	sink.close()
	// The last results get what is left of ShutdownTimeout, and at least shutdownGrace. Past
	// it, writes are cancelled, so an unreachable database cannot hold Run for minutes.
	select {
	case <-flushDone:
	case <-time.After(max(until(w.clock, stopBy), shutdownGrace)):
		stopWrites()
		<-flushDone
	}
	w.log.LogAttrs(wctx, slog.LevelInfo, "outbox worker stopped")
	return nil
}

// claimLoop is the worker's main loop. It is one goroutine, so it never overlaps itself.
//
// While a backlog drains, a claim seeks. It starts after the last row the previous claim took
// instead of at the front of the claim index. The front is full of the delete-marked entries of
// rows just claimed until InnoDB purges them. Every rescanEvery, and whenever a seeking claim
// comes back short, the next claim scans from the front, so no due row is left behind.
func (w *Worker) claimLoop(ctx context.Context) {
	poll := time.NewTimer(0)
	defer poll.Stop()
	wait, backlog := false, false
	var seek claimPos     // where the last claim ended
	var scanned time.Time // when a claim last started from the front
	rescan := false
	down := outage{what: "claim"}
	idle := w.cfg.MinPollInterval // the adaptive wait: MinPollInterval while rows arrive, up to PollInterval
	var lastClaim time.Time
	for {
		if wait {
			poll.Reset(down.backoff(idle))
			select {
			case <-ctx.Done():
				return
			case <-w.wake:
				// Wakes in quick succession (InTx after every commit) share one claim.
				if gap := wakeCoalesce - since(w.clock, lastClaim); gap > 0 {
					poll.Stop()
					poll.Reset(gap)
					select {
					case <-ctx.Done():
						return
					case <-poll.C:
					}
				}
			case <-poll.C:
			}
			poll.Stop()
		}
		if ctx.Err() != nil {
			return
		}
		if w.schemaHeld() { // a table needs a newer outboxgen, so claim nothing
			wait, backlog = true, false
			continue
		}
		n := w.reserve(ctx, backlog)
		if n == 0 {
			return // ctx done
		}
		if ctx.Err() != nil { // cancelled while waiting for slots, so claim nothing more
			w.mu.Lock()
			w.claiming = 0
			w.mu.Unlock()
			w.release(n)
			return
		}
		seeking := seekNext(backlog, rescan, !seek.due.IsZero(), since(w.clock, scanned))
		var from claimPos
		if seeking {
			from = seek
		} else {
			scanned = w.clock.Now()
		}
		lastClaim = w.clock.Now()
		w.claims.Add(1)
		got, last, more, err := w.claimAndDispatch(ctx, n, from)
		w.mu.Lock()
		w.claiming = 0
		w.mu.Unlock()
		w.testSignals.claimed.Signal(got)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			down.fail(ctx, w.log, err)
		} else {
			down.ok(ctx, w.log)
		}
		if got > 0 {
			seek = last
		}
		// more says other claims held the rows this one read. Due rows are left past its windows.
		backlog, rescan = claimFollowUp(n, got, more, seeking, err != nil)
		wait = !backlog
		idle = nextIdle(idle, got, err != nil, w.cfg.MinPollInterval, w.cfg.PollInterval)
	}
}

// reserve takes up to BatchSize free dispatch slots, waiting for at least one. While there is
// a backlog, it waits for half the slots and then up to slotGather more for the rest. Claims
// thus stay large instead of splitting into small cohorts that each pay a transaction. A claim
// of one row costs about as much as a claim of many. It returns 0 when ctx is done.
func (w *Worker) reserve(ctx context.Context, backlog bool) int {
	var gather *time.Timer
	gathered := false
	defer func() {
		if gather != nil {
			gather.Stop()
		}
	}()
	for {
		w.mu.Lock()
		n, take, enough := reserveSlots(slotState{
			free: w.free, prefetch: w.prefetchLocked(), batchSize: w.cfg.BatchSize,
			concurrency: w.cfg.Concurrency, sinkRoom: w.sinkCap - w.sink.len(),
		}, backlog, gathered)
		if take {
			// The hand-off counts the claim's slots as free from here, under the same lock.
			// Set later, a hand-off in between would find no slot free and leave its message
			// PENDING for a claim.
			w.free -= n
			w.claiming = n
			w.mu.Unlock()
			return n
		}
		w.mu.Unlock()
		if enough && gather == nil {
			gather = time.NewTimer(slotGather)
		}
		var gatherC <-chan time.Time
		if gather != nil {
			gatherC = gather.C
		}
		if gatherC == nil {
			w.testSignals.waitingSlots.Signal(struct{}{})
		}
		select {
		case <-ctx.Done():
			return 0
		case <-w.freed:
		case <-gatherC:
			gathered = true
		}
	}
}

// prefetchLocked is how many rows beyond the free slots a claim may take. It is as many as the
// slots are expected to start within prefetchHorizon, judged by the running average of
// handler durations. It is 0 until a handler has finished. w.mu is held.
func (w *Worker) prefetchLocked() int {
	return prefetchRows(w.avgTook, w.cfg.Concurrency, w.cfg.BatchSize)
}

func (w *Worker) release(n int) {
	if n <= 0 {
		return
	}
	w.mu.Lock()
	w.free += n
	w.mu.Unlock()
	w.signalFreed()
}

// report sends in to Config.Reporter. When that is a custom Reporter, report also logs it at
// error level, so an incident always leaves an error line on Logger. The default Reporter
// writes exactly that line itself.
func (w *Worker) report(ctx context.Context, in incident.Incident) {
	w.cfg.Reporter.Report(ctx, in)
	if w.logIncidents {
		attrs := []slog.Attr{slog.String("kind", string(in.Kind)), slog.String("subject", in.Subject)}
		if in.Err != nil {
			attrs = append(attrs, slog.String("error", in.Err.Error()))
		}
		w.log.LogAttrs(context.WithoutCancel(ctx), slog.LevelError, "outboxgen incident", attrs...)
	}
}
