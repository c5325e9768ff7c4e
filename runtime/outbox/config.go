// Worker configuration. Config, its defaults and their validation, and the internal timings
// that are deliberately not configurable.

package outbox

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/outboxgen/outboxgen/runtime/incident"
)

// Config tunes a Worker. The zero value is usable, since every zero field takes its default.
type Config struct {
	// BatchSize is the most rows one claim takes. A claim takes no more rows than there are
	// free dispatch slots, plus a short prefetch while recent handlers were fast. A row thus
	// starts its handler soon after its claim, and fast handlers still get claims of up to
	// BatchSize rows. A prefetched row that could not start in time to finish within its
	// lease is given back unhandled. Defaults to 100.
	BatchSize int
	// Concurrency is the number of handlers running at once, the dispatch slots. Defaults to
	// 16.
	Concurrency int
	// PollInterval is the longest wait between claims, reached when no message has arrived for
	// a while. An idle worker costs the database one claim per PollInterval. Polling adapts.
	// After a claim that found rows, the next claim comes MinPollInterval later. Such rows may
	// come from another process, where no Wake can reach this worker. Each claim that finds
	// nothing doubles the wait, up to PollInterval. A full claim claims again at once. Wake
	// and InTx cut a wait short. Defaults to 1s.
	PollInterval time.Duration
	// MinPollInterval is the wait between claims while messages keep arriving. Under steady
	// traffic, the delivery latency across processes is about this much, at about one claim
	// per MinPollInterval. It also spaces out the claims that Wake triggers. Wakes close to
	// the last claim share the next one. Lower it for latency, and raise it for fewer claims.
	// Defaults to 20ms, or PollInterval when that is shorter.
	MinPollInterval time.Duration
	// StaleAfter is the lease this worker writes on the rows it claims. A row's reclaim_after
	// is its claimed_at plus StaleAfter. Any worker reclaims a row still PROCESSING after it.
	// Every event timeout of the router must be shorter, or a slow handler would be reclaimed
	// and run twice. Defaults to 5m.
	StaleAfter time.Duration
	// ShutdownTimeout bounds how long Run waits, once its context is done, for in-flight
	// handlers before it cancels their contexts. Defaults to 30s.
	ShutdownTimeout time.Duration
	// ReclaimInterval is how often the worker reclaims expired leases and counts stuck rows.
	// Defaults to StaleAfter/4, at most 1m.
	ReclaimInterval time.Duration
	// DisableReclaim turns off this worker's reclaim, for a deployment where another process
	// does it. The stuck watch still runs and reports. Defaults to false.
	DisableReclaim bool
	// Logger receives the worker's log lines, whose attribute keys are snake_case. Defaults to
	// slog.Default().
	Logger *slog.Logger
	// Reporter receives incidents. incident.Stuck comes each time the watch sees rows
	// PROCESSING past three times their lease. incident.HandlerHung comes for a handler that
	// outlives its timeout. Each incident is also exactly one error-level "outboxgen incident"
	// line on Logger. The default Reporter writes that line, and with a custom Reporter the
	// worker writes it. Defaults to incident.Slog(Logger).
	Reporter incident.Reporter
	// Observer receives counts and durations for metrics. Defaults to NopObserver{}.
	Observer Observer
	// Middleware wraps every handler call, the first entry outermost. runtime/outboxotel's
	// tracing is one. NewWorker wraps each event type's handler once. It refuses a middleware
	// that is nil, returns nil or panics while wrapping. A panic in a call is recovered like a
	// handler's. Defaults to none.
	Middleware []Middleware
	// Retention is how long finished rows of the router's event types stay in the table (see
	// Retention). The zero value deletes SENT rows a day after they were sent and keeps FAILED
	// ones; one worker per database at a time does the deleting, at least once a minute.
	Retention Retention
}

// Worker defaults.
const (
	DefaultBatchSize       = 100
	DefaultConcurrency     = 16
	DefaultPollInterval    = time.Second
	DefaultMinPollInterval = 20 * time.Millisecond
	DefaultStaleAfter      = 5 * time.Minute
	DefaultShutdownTimeout = 30 * time.Second
	maxReclaimInterval     = time.Minute
	maxBatchSize           = 10000
)

// Internal timings, deliberately not configurable.
const (
	// flushLinger is the longest a result waits for others to share its write transaction.
	flushLinger = 20 * time.Millisecond
	// orderedFlushLinger replaces flushLinger while a result that releases an ordering key waits.
	orderedFlushLinger = 2 * time.Millisecond
	// slotGather is how long a claim under backlog waits for more free slots once half are free.
	slotGather = 2 * time.Millisecond
	// prefetchHorizon bounds how long a claimed row should wait for a dispatch slot. A claim
	// may take the rows the slots are expected to start within it, judged by recent handler
	// durations. A claim costs about as much for one row as for a full batch. With fast
	// handlers, the prefetch is what makes claims large. With slow handlers, it is 0 and
	// claims follow free slots.
	prefetchHorizon = 50 * time.Millisecond
	// handlerEWMAWeight is the weight of the newest handler duration in the running average.
	handlerEWMAWeight = 0.2
	// claimRounds is how many windows of 2n candidate rows one claim reads when other claims
	// hold the rows of the first. That is enough for a few workers claiming at the same moment.
	// Every window may be held, by many more workers or by a claim a hung worker left open.
	// The claim then falls back to the slower SKIP LOCKED scan of the claim index.
	claimRounds = 3
	// rescanEvery bounds how long a backlog drain claims from where its last claim ended
	// before scanning the claim index from the start again. A row due before that point waits
	// at most this much longer than it would with every claim a full scan. Such a row comes
	// from an enqueue whose transaction committed late, or from another worker's give-back.
	rescanEvery = 100 * time.Millisecond
	// wakeCoalesce is the shortest time between two claims that Wake starts. Under a stream of
	// commits, InTx wakes after each. The wakes within wakeCoalesce share one claim instead of
	// each paying a claim transaction. The price is up to this much latency.
	wakeCoalesce = 5 * time.Millisecond
	// shutdownGrace is how long Run waits for handlers after cancelling their contexts.
	shutdownGrace = 250 * time.Millisecond
	// writeTimeout bounds one result-write transaction.
	writeTimeout = 30 * time.Second
	// claimTimeout bounds one claim transaction.
	claimTimeout = 10 * time.Second
	// reclaimBatch is the most rows one reclaim UPDATE changes.
	reclaimBatch = 1000
	// maxLastError keeps last_error inside a TEXT column, which holds 65535 bytes.
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
	if c.MinPollInterval == 0 {
		c.MinPollInterval = DefaultMinPollInterval
	}
	c.MinPollInterval = min(c.MinPollInterval, c.PollInterval)
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
		{"PollInterval", c.PollInterval}, {"MinPollInterval", c.MinPollInterval}, {"StaleAfter", c.StaleAfter},
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
	return c.Retention.validate()
}
