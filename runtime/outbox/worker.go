package outbox

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	mrand "math/rand/v2"
	"runtime/debug"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/outboxgen/outboxgen/runtime/incident"
	"github.com/outboxgen/outboxgen/runtime/internal/store"
)

// Config tunes a Worker. The zero value is usable: every zero field takes its default.
type Config struct {
	// BatchSize is the most rows one claim takes. A claim takes no more rows than there are
	// free dispatch slots, plus, when recent handlers were fast, the rows those slots are
	// expected to start within 50ms (prefetch): so a row starts its handler soon after its
	// claimed_at, and fast handlers still get claims of up to BatchSize rows. A prefetched row
	// that could not start in time to finish within its lease is given back unhandled.
	// Defaults to 100.
	BatchSize int
	// Concurrency is the number of handlers running at once (dispatch slots). Defaults to 16.
	Concurrency int
	// PollInterval is the wait after a claim that found fewer rows than it asked for. Wake (and
	// InTx) cut it short. Defaults to 1s.
	PollInterval time.Duration
	// StaleAfter is the lease this worker writes on the rows it claims (reclaim_after =
	// claimed_at + StaleAfter). A row still PROCESSING after it is reclaimed by any worker. Every
	// event timeout of the router must be shorter, or a slow handler would be reclaimed and run
	// twice. Defaults to 5m.
	StaleAfter time.Duration
	// ShutdownTimeout bounds how long Run waits, once its context is done, for in-flight
	// handlers before it cancels their contexts. Defaults to 30s.
	ShutdownTimeout time.Duration
	// ReclaimInterval is how often the worker reclaims expired leases and counts stuck rows.
	// Defaults to StaleAfter/4, at most 1m.
	ReclaimInterval time.Duration
	// DisableReclaim turns off this worker's reclaim (another process does it). The stuck watch
	// still runs and reports. Defaults to false.
	DisableReclaim bool
	// Logger receives the worker's log lines (snake_case keys). Defaults to slog.Default().
	Logger *slog.Logger
	// Reporter receives incidents: incident.Stuck (rows PROCESSING past 3x their lease) each
	// time the watch sees them, and incident.HandlerHung. Each incident is also exactly one
	// error-level "outboxgen incident" line on Logger: the default Reporter writes it, and with
	// a custom Reporter the worker writes it. Defaults to incident.Slog(Logger).
	Reporter incident.Reporter
	// Observer receives counts and durations for metrics. Defaults to NopObserver{}.
	Observer Observer
}

// Worker defaults.
const (
	DefaultBatchSize       = 100
	DefaultConcurrency     = 16
	DefaultPollInterval    = time.Second
	DefaultStaleAfter      = 5 * time.Minute
	DefaultShutdownTimeout = 30 * time.Second
	maxReclaimInterval     = time.Minute
	maxBatchSize           = 10000
)

// Internal timings, deliberately not configurable.
const (
	// flushLinger is the longest a result waits for others to share its write transaction.
	flushLinger = 20 * time.Millisecond
	// slotGather is how long a claim under backlog waits for more free slots once half are free.
	slotGather = 2 * time.Millisecond
	// prefetchHorizon bounds how long a claimed row should wait for a dispatch slot: a claim
	// may take the rows the slots are expected to start within it, judged by recent handler
	// durations. A claim costs about the same for 1 row as for 100, so with fast handlers this
	// is what makes claims large; with slow handlers it is 0 and claims follow free slots.
	prefetchHorizon = 50 * time.Millisecond
	// handlerEWMAWeight is the weight of the newest handler duration in the running average.
	handlerEWMAWeight = 0.2
	// claimRounds is how many windows of 2n candidate rows one claim reads when other claims
	// hold the rows of the first: enough for a few workers claiming at the same moment. When
	// every window is held (many more workers, or a claim left open by a hung one), the claim
	// falls back to the slower SKIP LOCKED scan of the claim index.
	claimRounds = 3
	// rescanEvery bounds how long a backlog drain claims from where its last claim ended
	// (claimed.due) before scanning the claim index from the start again. A row due before that
	// point (an enqueue whose transaction committed late, a row another worker gave back)
	// therefore waits at most this much longer than it would with every claim a full scan.
	rescanEvery = 100 * time.Millisecond
	// shutdownGrace is how long Run waits for handlers after cancelling their contexts.
	shutdownGrace = 250 * time.Millisecond
	// writeTimeout bounds one result-write transaction.
	writeTimeout = 30 * time.Second
	// claimTimeout bounds one claim transaction.
	claimTimeout = 10 * time.Second
	// reclaimBatch is the most rows one reclaim UPDATE changes.
	reclaimBatch = 1000
	// maxLastError keeps last_error inside a TEXT column (65535 bytes).
	maxLastError = 60000
)

func (c Config) withDefaults() Config {
	if c.BatchSize == 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.PollInterval == 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.StaleAfter == 0 {
		c.StaleAfter = DefaultStaleAfter
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = DefaultShutdownTimeout
	}
	if c.ReclaimInterval == 0 {
		c.ReclaimInterval = min(c.StaleAfter/4, maxReclaimInterval)
		if c.ReclaimInterval <= 0 {
			c.ReclaimInterval = time.Millisecond
		}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Reporter == nil {
		c.Reporter = incident.Slog(c.Logger)
	}
	if c.Observer == nil {
		c.Observer = NopObserver{}
	}
	return c
}

// validate names the field at fault. It runs before defaults, so 0 is always allowed.
func (c Config) validate() error {
	ints := []struct {
		name string
		v    int
	}{{"BatchSize", c.BatchSize}, {"Concurrency", c.Concurrency}}
	for _, f := range ints {
		if f.v < 0 {
			return fmt.Errorf("outbox: Config.%s must be >= 0 (0 takes the default), got %d", f.name, f.v)
		}
	}
	if c.BatchSize > maxBatchSize {
		return fmt.Errorf("outbox: Config.BatchSize must be at most %d, got %d", maxBatchSize, c.BatchSize)
	}
	durs := []struct {
		name string
		v    time.Duration
	}{
		{"PollInterval", c.PollInterval}, {"StaleAfter", c.StaleAfter},
		{"ShutdownTimeout", c.ShutdownTimeout}, {"ReclaimInterval", c.ReclaimInterval},
	}
	for _, f := range durs {
		if f.v < 0 {
			return fmt.Errorf("outbox: Config.%s must be >= 0 (0 takes the default), got %s", f.name, f.v)
		}
	}
	if c.StaleAfter > 0 && c.StaleAfter < time.Millisecond {
		return fmt.Errorf("outbox: Config.StaleAfter must be at least 1ms, got %s", c.StaleAfter)
	}
	return nil
}

// Worker claims due messages of its router's event types, dispatches them to their handlers
// and records the results; see the package documentation for the cycle. Several workers, in
// one process or many, share the table safely.
type Worker struct {
	db     *sql.DB
	router *Router
	cfg    Config
	types  []string
	log    *slog.Logger
	// logIncidents: also log incidents at error level (a custom Reporter may not log them).
	logIncidents bool

	wake    chan struct{}
	running atomic.Bool

	mu       sync.Mutex
	free     int                     // free dispatch slots: Concurrency - claimed rows not yet finished (negative while rows are prefetched)
	avgTook  float64                 // running average of handler durations in ns; 0 until one finishes
	sem      chan struct{}           // dispatch slots of this Run: a handler runs while it holds one
	inflight map[MessageID]*inflight // handlers running now
	freed    chan struct{}           // signalled when slots or backlog room free up
	sink     *resultSink             // results waiting for the flusher; nil outside Run
	sinkCap  int                     // most results allowed to wait for a write
	hctx     context.Context         // parent of handler contexts; outlives Run's ctx
	gen      int                     // counts Runs: a handler abandoned by an earlier Run frees no slot of this one
	dispatch sync.WaitGroup          // running dispatch goroutines

	// Test seams.
	jitter           func(n int64) int64 // uniform in [0, n]
	afterClaimSelect func()              // inside the claim transaction, after the SELECT
	claimFallbacks   atomic.Int64        // claims that fell back to the index scan
}

type inflight struct {
	eventType string
	attempt   int
	token     string
	started   time.Time
}

// NewWorker returns a Worker for the event types r handles at this moment. It checks cfg
// (errors name the field), that every event timeout of r is shorter than StaleAfter (errors
// name the event), and the connection: the DSN must set parseTime=true and use loc=UTC.
func NewWorker(db *sql.DB, r *Router, cfg Config) (*Worker, error) {
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
	types := r.EventTypes()
	for _, t := range types {
		if p, _ := r.Policy(t); p.Timeout >= cfg.StaleAfter {
			return nil, fmt.Errorf("outbox: NewWorker: event %q: timeout %s is not shorter than Config.StaleAfter %s (a slow handler would be reclaimed and run twice)", t, p.Timeout, cfg.StaleAfter)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := checkClock(ctx, db); err != nil {
		return nil, fmt.Errorf("outbox: NewWorker: %w", err)
	}
	w := &Worker{
		db: db, router: r, cfg: cfg, types: types, log: cfg.Logger, logIncidents: logIncidents,
		wake:     make(chan struct{}, 1),
		freed:    make(chan struct{}, 1),
		inflight: map[MessageID]*inflight{},
		jitter:   func(n int64) int64 { return mrand.Int64N(n + 1) },
	}
	return w, nil
}

// Wake makes a waiting worker claim at once instead of at its next poll. It never blocks.
// InTx calls it after commit; a caller that commits its own transaction calls it after Commit.
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

// Run claims, dispatches and records until ctx is done, then shuts down: it stops claiming at
// once; in-flight handlers keep their contexts until their event timeout or until
// ShutdownTimeout passes, when their contexts are cancelled; the results of those that return
// are recorded; and Run returns nil. A handler that ignores its context is left running (Go
// cannot stop it); its row is reclaimed after its lease.
//
// Database errors do not end Run. While the database is unreachable, each failed claim,
// reclaim and stuck check is logged at error level and tried again at the next PollInterval
// or ReclaimInterval; claims resume by themselves once it answers (database/sql opens new
// connections). A result that cannot be written is retried for up to half of StaleAfter, then
// given up: its row is reclaimed after its lease and delivered again.
//
// Run returns an error only when the Worker is already running; otherwise it returns nil, and
// only after ctx is done. It needs no restart loop.
func (w *Worker) Run(ctx context.Context) error {
	if !w.running.CompareAndSwap(false, true) {
		return errors.New("outbox: Worker.Run: already running")
	}
	defer w.running.Store(false)
	registerWorker(w.db, w)
	defer unregisterWorker(w.db, w)

	// Handler contexts survive Run's ctx (they have their own timeout) until the shutdown
	// deadline cancels them; result writes must survive it too.
	hctx, hardStop := context.WithCancel(context.WithoutCancel(ctx))
	defer hardStop()
	wctx := context.WithoutCancel(ctx)

	sink := newResultSink()
	w.mu.Lock()
	w.gen++
	w.free = w.cfg.Concurrency
	w.sem = make(chan struct{}, w.cfg.Concurrency)
	w.sink = sink
	w.sinkCap = 4 * max(w.cfg.BatchSize, w.cfg.Concurrency)
	w.hctx = hctx
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
	<-maintDone

	// Shutdown: wait for in-flight handlers, then cancel them, then give up on the hung.
	done := make(chan struct{})
	go func() {
		w.dispatch.Wait()
		close(done)
	}()
	deadline := time.NewTimer(w.cfg.ShutdownTimeout)
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
	<-flushDone
	w.log.LogAttrs(wctx, slog.LevelInfo, "outbox worker stopped")
	return nil
}

// claimLoop is the worker's main loop; one goroutine, so it never overlaps itself.
//
// While a backlog drains, a claim starts after the last row the previous claim took (seek)
// instead of at the front of the claim index, which is full of the delete-marked
// entries of rows just claimed until InnoDB purges them. Every rescanEvery, and whenever a
// seeking claim comes back short, the next claim scans from the front, so no due row is left
// behind.
func (w *Worker) claimLoop(ctx context.Context) {
	poll := time.NewTimer(0)
	defer poll.Stop()
	wait, backlog := false, false
	var seek claimPos     // where the last claim ended
	var scanned time.Time // when a claim last started from the front
	rescan := false
	for {
		if wait {
			poll.Reset(w.cfg.PollInterval)
			select {
			case <-ctx.Done():
				return
			case <-w.wake:
			case <-poll.C:
			}
			poll.Stop()
		}
		if ctx.Err() != nil {
			return
		}
		n := w.reserve(ctx, backlog)
		if n == 0 {
			return // ctx done
		}
		if ctx.Err() != nil { // cancelled while waiting for slots: claim nothing more
			w.release(n)
			return
		}
		seeking := backlog && !rescan && !seek.due.IsZero() && time.Since(scanned) < rescanEvery
		var from claimPos
		if seeking {
			from = seek
		} else {
			scanned = time.Now()
		}
		got, last, more, err := w.claimAndDispatch(ctx, n, from)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			w.log.LogAttrs(ctx, slog.LevelError, "outbox claim failed", slog.String("error", err.Error()))
		}
		if got > 0 {
			seek = last
		}
		// A full claim, or one that left due rows past its windows (other claims held the rows
		// it read), means more rows are due: claim again as soon as slots allow. A short claim
		// that seeked may have passed rows due earlier: scan from the front at once.
		full := err == nil && (got == n || (more && got > 0))
		rescan = err == nil && seeking && !full
		backlog = full || rescan
		wait = !backlog
	}
}

// reserve takes up to BatchSize free dispatch slots, waiting for at least one. While there is
// a backlog it waits for half the slots and then up to slotGather more for the rest, so that
// claims stay large (a claim costs about the same for 1 row as for 16) instead of splitting
// into small cohorts that each pay a transaction. It returns 0 when ctx is done.
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
		prefetch := w.prefetchLocked()
		full := min(w.cfg.BatchSize, w.cfg.Concurrency+prefetch)
		want := 1
		if backlog {
			want = max(1, full/2)
		}
		n := min(w.free+prefetch, w.cfg.BatchSize, max(0, w.sinkCap-w.sink.len()))
		if n >= full || (n >= want && (!backlog || gathered)) {
			w.free -= n
			w.mu.Unlock()
			return n
		}
		w.mu.Unlock()
		if n >= want && gather == nil {
			gather = time.NewTimer(slotGather)
		}
		var gatherC <-chan time.Time
		if gather != nil {
			gatherC = gather.C
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

// prefetchLocked is how many rows beyond the free slots a claim may take: as many as the
// slots are expected to start within prefetchHorizon, from the running average of handler
// durations. 0 until a handler has finished. w.mu is held.
func (w *Worker) prefetchLocked() int {
	if w.avgTook <= 0 {
		return 0
	}
	n := float64(w.cfg.Concurrency) * float64(prefetchHorizon) / w.avgTook
	return int(min(n, float64(w.cfg.BatchSize)))
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

// claimed is one row this worker claimed.
type claimed struct {
	id          MessageID
	eventType   string
	payload     []byte
	key         string
	attempt     int
	maxAttempts int
	enqueuedAt  time.Time
	due         time.Time // next_attempt_at when claimed
	token       string
	claimStart  time.Time // local time before the claim began: the lease started after it
}

// claimAndDispatch claims up to n rows due at or after from (n slots are reserved) and starts
// their handlers. last is the latest position (due time, id) among the rows claimed; more is
// claim's.
func (w *Worker) claimAndDispatch(ctx context.Context, n int, from claimPos) (got int, last claimPos, more bool, err error) {
	rows, more, err := w.claim(ctx, n, from)
	w.release(n - len(rows))
	if err != nil {
		return 0, claimPos{}, false, err
	}
	for _, m := range rows {
		w.startDispatch(m)
		if p := (claimPos{due: m.due, id: int64(m.id)}); p.after(last) {
			last = p
		}
	}
	return len(rows), last, more, nil
}

// claim is step 1: one short READ COMMITTED transaction that locks up to n due rows of this
// router's types after from and marks them PROCESSING under a fresh token. It reads the ids of
// the first 2n due rows without locking (index order), then locks the first n of them by
// primary key, SKIP LOCKED: claims never wait for each other. When other claims hold some, it
// takes the rest of the window, then the next window, up to claimRounds of them, and when
// every window was held, falls back to a SKIP LOCKED scan of the claim index. more says due
// rows were left past the last window.
// A claim that has begun finishes even if Run's ctx is cancelled meanwhile (it takes
// milliseconds): cancelling mid-COMMIT could leave rows claimed that nobody dispatches until
// their lease ends. The loop starts no new claim after cancellation.
func (w *Worker) claim(ctx context.Context, n int, from claimPos) (_ []claimed, more bool, err error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), claimTimeout)
	defer cancel()
	start := time.Now()
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
	rows, more, err := w.lockDue(ctx, db, n, from)
	if err != nil {
		return nil, false, err
	}
	if w.afterClaimSelect != nil {
		w.afterClaimSelect()
	}
	if len(rows) == 0 {
		// Nothing locked; ending the transaction either way releases nothing.
		if err := tx.Commit(); err != nil {
			return nil, false, fmt.Errorf("commit empty claim: %w", err)
		}
		w.cfg.Observer.Claimed(0, time.Since(start))
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
	if err := tx.Commit(); err != nil {
		return nil, false, fmt.Errorf("commit claim: %w", err)
	}
	out := make([]claimed, len(rows))
	for i, r := range rows {
		out[i] = claimed{
			id: MessageID(r.ID), eventType: r.EventType, payload: r.Payload, key: r.IdempotencyKey,
			attempt: int(r.Attempts) + 1, maxAttempts: int(r.MaxAttempts), enqueuedAt: r.CreatedAt, due: r.NextAttemptAt, token: token,
			claimStart: start,
		}
	}
	d := time.Since(start)
	w.cfg.Observer.Claimed(len(out), d)
	w.log.LogAttrs(ctx, slog.LevelDebug, "outbox claimed", slog.Int("claimed", len(out)),
		slog.String("claim_token", token), slog.Duration("took", d))
	return out, more, nil
}

// lockDue locks up to n due rows of this router's types after from, inside the claim's
// transaction (see claim for the steps). more says due rows were left past the last window.
func (w *Worker) lockDue(ctx context.Context, db store.DBTX, n int, from claimPos) (rows []store.MessageClaimLockIDsRow, more bool, err error) {
	if from.due.IsZero() {
		from.due = claimFromStart
	}
	have := map[int64]bool{}
	lock := func(ids []int64, limit int) error {
		locked, err := q.MessageClaimLockIDs(ctx, db, store.MessageClaimLockIDsParams{Ids: ids, EventTypes: w.types, Limit: int32(limit)})
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
			AfterDue: after.due, AfterID: after.id, EventTypes: w.types, Limit: int32(2 * n)})
		if err != nil {
			return nil, false, fmt.Errorf("claim candidates: %w", err)
		}
		ids := make([]int64, 0, len(cands))
		for _, c := range cands {
			if !have[c.ID] {
				ids = append(ids, c.ID)
			}
		}
		// First exactly the rows still needed, in due order, so the claim takes the oldest;
		// then, if others held some of them, the rest of the window (lowest ids first, so a
		// row due earlier with a higher id can fall behind the seek until the next rescan).
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
		// Other claims held every window: a claim left open by a hung worker, or many workers
		// at once. The index scan skips held rows wherever they are; it returns ours too.
		w.claimFallbacks.Add(1)
		extra, err := q.MessageClaimSelect(ctx, db, store.MessageClaimSelectParams{
			AfterDue: from.due, AfterID: from.id, EventTypes: w.types, Limit: int32(n + len(rows))})
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

// claimPos is a position in the claim index's order: (next_attempt_at, id).
type claimPos struct {
	due time.Time
	id  int64
}

func (p claimPos) after(o claimPos) bool {
	return p.due.After(o.due) || (p.due.Equal(o.due) && p.id > o.id)
}

// claimFromStart is before every next_attempt_at (DATETIME starts at year 1000; the driver
// would send the zero time.Time as '0000-00-00', which strict modes reject).
var claimFromStart = time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)

// newToken returns 32 hex characters (claim_token is VARCHAR(32)).
func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error (Go 1.24+).
	return hex.EncodeToString(b[:])
}

// startDispatch is step 2 for one row: its handler runs in its own goroutine, outside every
// transaction, once it holds a dispatch slot (at once, unless the row was prefetched).
func (w *Worker) startDispatch(m claimed) {
	w.mu.Lock()
	hctx, sink, gen, sem := w.hctx, w.sink, w.gen, w.sem
	w.mu.Unlock()
	w.dispatch.Add(1)
	go func() {
		defer w.dispatch.Done()
		res, ran := w.acquireAndHandle(hctx, sem, m)
		w.mu.Lock()
		delete(w.inflight, m.id)
		if w.gen == gen {
			w.free++
			if ran {
				took := float64(time.Since(res.started))
				if w.avgTook == 0 {
					w.avgTook = took
				} else {
					w.avgTook += handlerEWMAWeight * (took - w.avgTook)
				}
			}
		}
		w.mu.Unlock()
		if !sink.put(res) {
			// Run has returned (this handler ignored its context past the shutdown deadline):
			// nothing may write any more, so the lease expires and the row is reclaimed.
			w.log.LogAttrs(context.Background(), slog.LevelWarn, "outbox result after shutdown dropped; the row will be reclaimed",
				slog.Int64("message_id", int64(m.id)), slog.String("event_type", m.eventType), slog.String("outcome", string(res.outcome)))
		}
		w.signalFreed()
	}()
}

// acquireAndHandle waits for a dispatch slot and runs the handler. A prefetched row that
// waited so long that its handler could outlive the lease (and be reclaimed and run twice) is
// given back unhandled instead: PENDING again, due at once. ran says whether the handler ran.
func (w *Worker) acquireAndHandle(hctx context.Context, sem chan struct{}, m claimed) (res result, ran bool) {
	select {
	case sem <- struct{}{}:
	default:
		select {
		case sem <- struct{}{}:
		case <-hctx.Done():
			return w.giveBack(m, "the worker shut down before a dispatch slot was free"), false
		}
		rt, _ := w.router.lookup(m.eventType)
		if waited := time.Since(m.claimStart); waited+rt.policy.Timeout >= w.cfg.StaleAfter {
			<-sem
			return w.giveBack(m, fmt.Sprintf("waited %s for a dispatch slot; its %s timeout would outlive the lease", waited.Round(time.Millisecond), rt.policy.Timeout)), false
		}
	}
	defer func() { <-sem }()
	w.mu.Lock()
	w.inflight[m.id] = &inflight{eventType: m.eventType, attempt: m.attempt, token: m.token, started: time.Now()}
	w.mu.Unlock()
	return w.handle(hctx, m), true
}

// giveBack is the result for a claimed row whose handler was never called.
func (w *Worker) giveBack(m claimed, why string) result {
	w.log.LogAttrs(context.Background(), slog.LevelWarn, "outbox message given back unhandled",
		slog.Int64("message_id", int64(m.id)), slog.String("event_type", m.eventType), slog.String("reason", why))
	return result{id: m.id, eventType: m.eventType, token: m.token, outcome: OutcomeRetried,
		lastError: "not handled: " + why, started: time.Now()}
}

// result is one handler outcome waiting to be written.
type result struct {
	id        MessageID
	eventType string
	token     string
	outcome   Outcome
	delay     time.Duration // retried: until the next attempt
	lastError string        // retried and failed
	started   time.Time     // when the handler was called
}

// handle runs the handler with its timeout, recovers a panic, and decides the outcome.
func (w *Worker) handle(hctx context.Context, m claimed) result {
	rt, ok := w.router.lookup(m.eventType)
	if !ok { // unreachable: the claim asks only for the router's types
		return result{id: m.id, eventType: m.eventType, token: m.token, outcome: OutcomeFailed,
			lastError: fmt.Sprintf("no handler for event type %q", m.eventType)}
	}
	p := rt.policy
	ctx, cancel := context.WithTimeout(hctx, p.Timeout)
	defer cancel()
	d := Delivery{
		MessageID: m.id, EventType: m.eventType, IdempotencyKey: m.key, Attempt: m.attempt,
		EnqueuedAt: m.enqueuedAt, ClaimToken: m.token,
	}
	if d.IdempotencyKey == "" {
		d.IdempotencyKey = "msg:" + strconv.FormatInt(int64(m.id), 10)
	}
	// Reported once if the handler is still running well past its deadline: it ignores its
	// context and keeps its slot.
	hung := time.AfterFunc(p.Timeout+hungGrace(p.Timeout), func() {
		w.report(context.Background(), incident.Incident{
			Kind:    incident.HandlerHung,
			Subject: fmt.Sprintf("message %d (%s)", m.id, m.eventType),
			Err:     fmt.Errorf("handler still running %s after its %s timeout; it ignores its context and keeps a dispatch slot", hungGrace(p.Timeout), p.Timeout),
		})
	})
	start := time.Now()
	err := callHandler(ctx, rt.handler, m.payload, d)
	hung.Stop()
	took := time.Since(start)

	res := result{id: m.id, eventType: m.eventType, token: m.token, started: start}
	switch {
	case err == nil:
		// Also after the deadline: the work is done; the fence decides whether the write lands.
		res.outcome = OutcomeSent
	case IsPermanent(err):
		res.outcome = OutcomeFailed
		res.lastError = fmt.Sprintf("attempt %d: %v", m.attempt, err)
	case m.attempt >= m.maxAttempts:
		res.outcome = OutcomeFailed
		res.lastError = fmt.Sprintf("attempt %d of %d: %v", m.attempt, m.maxAttempts, err)
	default:
		res.outcome = OutcomeRetried
		res.lastError = fmt.Sprintf("attempt %d of %d: %v", m.attempt, m.maxAttempts, err)
		if d, ok := retryDelay(err); ok {
			res.delay = d
		} else {
			res.delay = w.backoff(p.Backoff, m.attempt)
		}
	}
	res.lastError = truncate(res.lastError, maxLastError)
	w.cfg.Observer.Handled(m.eventType, res.outcome, took)
	if err != nil {
		level := slog.LevelWarn
		if res.outcome == OutcomeFailed {
			level = slog.LevelError
		}
		attrs := []slog.Attr{slog.Int64("message_id", int64(m.id)), slog.String("event_type", m.eventType),
			slog.Int("attempt", m.attempt), slog.String("outcome", string(res.outcome))}
		if res.outcome == OutcomeRetried { // a FAILED message is not retried: retry_in=0s would say "at once"
			attrs = append(attrs, slog.Duration("retry_in", res.delay))
		}
		attrs = append(attrs, slog.String("error", err.Error()))
		w.log.LogAttrs(context.Background(), level, "outbox handler failed", attrs...)
	}
	return res
}

func hungGrace(timeout time.Duration) time.Duration { return max(100*time.Millisecond, timeout/10) }

// callHandler turns a panic into an error carrying the stack.
func callHandler(ctx context.Context, h HandlerFunc, payload []byte, d Delivery) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v\n%s", p, debug.Stack())
		}
	}()
	return h(ctx, payload, d)
}

// backoff is full jitter: uniform in [0, min(Max, Initial*2^(attempt-1))].
func (w *Worker) backoff(b Backoff, attempt int) time.Duration {
	ceiling := b.Max
	if attempt <= 62 {
		if f := float64(b.Initial) * math.Pow(2, float64(attempt-1)); f < float64(b.Max) {
			ceiling = time.Duration(f)
		}
	}
	if ceiling <= 0 {
		return 0
	}
	return time.Duration(w.jitter(int64(ceiling)))
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + " …(truncated)"
}

// reportAbandoned reports the handlers still running after the shutdown deadline.
func (w *Worker) reportAbandoned(ctx context.Context) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for id, f := range w.inflight {
		w.report(ctx, incident.Incident{
			Kind:    incident.HandlerHung,
			Subject: fmt.Sprintf("message %d (%s)", id, f.eventType),
			Err: fmt.Errorf("handler still running %s after its context was cancelled at shutdown; Run returns without it and the row is reclaimed after its lease",
				time.Since(f.started).Round(time.Millisecond)),
		})
	}
}

// resultSink collects results between handlers and the flusher.
type resultSink struct {
	mu     sync.Mutex
	buf    []result
	closed bool
	notify chan struct{}
}

func newResultSink() *resultSink { return &resultSink{notify: make(chan struct{}, 1)} }

// put queues r; false when the sink is closed (Run has returned).
func (s *resultSink) put(r result) bool {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return false
	}
	s.buf = append(s.buf, r)
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
	batch, s.buf = s.buf, nil
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

// flushLoop is step 3: it writes results in batches, one transaction per batch. A batch is
// written once BatchSize results wait or flushLinger after the first of them arrived, so
// under load one commit records many claims' results (commits, not the loop, bound
// throughput) while no result waits much longer than flushLinger (<= 100ms) for its write.
func (w *Worker) flushLoop(ctx context.Context, sink *resultSink) {
	linger := time.NewTimer(flushLinger)
	linger.Stop()
	for {
		<-sink.notify
		linger.Reset(flushLinger)
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
		}
		if closed {
			// Results put before close are in batch; put refuses the rest.
			if rest, _ := sink.take(); len(rest) > 0 {
				w.writeResults(ctx, rest)
			}
			return
		}
	}
}

// writeResults records a batch with fenced writes in one transaction. A failed write is
// retried (the fence makes a repeat harmless) with backoff for up to half the lease, so a
// database hiccup of seconds does not turn delivered messages into redeliveries after their
// lease; meanwhile the full result sink stops new claims. Once Run is shutting down it gives
// up after a few quick tries, so Run can return. Refused writes (the row was reclaimed and is
// no longer this claim's) are logged and counted; they change nothing.
func (w *Worker) writeResults(ctx context.Context, batch []result) (written, refused int) {
	return w.writeResultsUntil(ctx, batch, time.Now().Add(w.cfg.StaleAfter/2), func() bool {
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
		wctx, cancel := context.WithTimeout(ctx, writeTimeout)
		written, refused, err = w.writeResultsTx(wctx, batch)
		cancel()
		if err == nil {
			if try > 1 {
				w.log.LogAttrs(ctx, slog.LevelInfo, "outbox result write succeeded after retries",
					slog.Int("results", len(batch)), slog.Int("try", try))
			}
			return written, refused
		}
		if time.Now().Add(pause).After(deadline) || (try >= 4 && shuttingDown()) {
			break
		}
		w.log.LogAttrs(ctx, slog.LevelWarn, "outbox result write failed; retrying",
			slog.Int("results", len(batch)), slog.Int("try", try), slog.Duration("retry_in", pause), slog.String("error", err.Error()))
		time.Sleep(pause)
		pause = min(pause*2, 2*time.Second)
	}
	// The rows stay PROCESSING and are reclaimed after their lease: delivered again, not lost.
	w.log.LogAttrs(ctx, slog.LevelError, "outbox result write failed; the rows will be reclaimed after their lease and delivered again",
		slog.Int("results", len(batch)), slog.String("error", err.Error()))
	return 0, 0
}

func (w *Worker) writeResultsTx(ctx context.Context, batch []result) (written, refused int, err error) {
	// Id order keeps concurrent writers' lock order consistent.
	sort.Slice(batch, func(i, j int) bool { return batch[i].id < batch[j].id })
	sent := map[string][]int64{} // successes by claim token: one UPDATE per claim
	var tokens []string
	others := 0
	for _, r := range batch {
		if r.outcome != OutcomeSent {
			others++
			continue
		}
		if _, ok := sent[r.token]; !ok {
			tokens = append(tokens, r.token)
		}
		sent[r.token] = append(sent[r.token], int64(r.id))
	}

	// One statement needs no transaction (autocommit saves BEGIN and COMMIT round trips);
	// several share one, so a batch costs one commit. Fenced updates by primary key lock only
	// their own rows, so the default isolation is fine.
	// Inlined arguments: one round trip per statement whatever the DSN (see inlineExec).
	var db store.DBTX = inlineExec{w.db}
	var tx *sql.Tx
	if len(tokens)+others > 1 {
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
				}
			}
		}
	}
	for _, r := range batch {
		var n int64
		var err error
		tok := sql.NullString{String: r.token, Valid: true}
		msg := sql.NullString{String: r.lastError, Valid: true}
		switch r.outcome {
		case OutcomeSent:
			continue
		case OutcomeRetried:
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

// maintainLoop runs reclaim (step 4) and the stuck watch (step 5) at start and then every
// ReclaimInterval until ctx is done.
func (w *Worker) maintainLoop(ctx context.Context) {
	t := time.NewTicker(w.cfg.ReclaimInterval)
	defer t.Stop()
	for {
		if !w.cfg.DisableReclaim {
			if _, err := w.reclaimOnce(ctx); err != nil && ctx.Err() == nil {
				w.log.LogAttrs(ctx, slog.LevelError, "outbox reclaim failed", slog.String("error", err.Error()))
			}
		}
		if _, err := w.watchOnce(ctx); err != nil && ctx.Err() == nil {
			w.log.LogAttrs(ctx, slog.LevelError, "outbox stuck watch failed", slog.String("error", err.Error()))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// reclaimOnce returns expired leases to PENDING (or FAILED when attempts are exhausted), in
// batches, and returns how many rows it moved. The UPDATE is idempotent, so every worker runs
// it without a leader.
func (w *Worker) reclaimOnce(ctx context.Context) (int64, error) {
	var total int64
	for {
		n, err := execReadCommitted(ctx, w.db, func(tx *sql.Tx) (int64, error) {
			return q.MessageReclaimStale(ctx, tx, reclaimBatch)
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

// watchOnce counts stuck rows (PROCESSING past 3x their lease: nobody is reclaiming) and
// reports them as an incident each time it sees any.
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
		// Through report only: a line of our own as well would page log-based alerting twice.
		w.report(ctx, incident.Incident{Kind: incident.Stuck, Subject: "outbox_messages", Err: errors.New(msg)})
	}
	return n, nil
}

// report sends in to Config.Reporter and, when that is a custom Reporter, also logs it at
// error level, so an incident always leaves an error line on Logger (the default Reporter
// writes exactly that line itself).
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
