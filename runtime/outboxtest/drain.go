package outboxtest

import (
	"context"
	"database/sql"
	"log/slog"
	"strings"
	"testing"

	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// DrainResult says what a Drain did: Sent and Failed count the messages that reached SENT or
// FAILED during it (those its handlers enqueued included), Retried the failed attempts that
// were rescheduled.
type DrainResult struct {
	Sent, Retried, Failed int
}

// DrainOption changes how Drain delivers.
type DrainOption func(*drainConfig)

type drainConfig struct {
	retryNow bool
	cfg      outbox.Config
	hasCfg   bool
}

// RetriesNow makes a retried message due again at once, so the same Drain delivers it again
// without waiting for its backoff, until it is sent or fails for good (MaxAttempts).
func RetriesNow() DrainOption {
	return func(c *drainConfig) { c.retryNow = true }
}

// WithConfig drains with cfg, as a Worker built with it would deliver: its Middleware wraps the
// handlers, its Observer sees them. Without it Drain uses the zero Config, with log lines going
// to the test's log (t.Log) at warning level and up.
func WithConfig(cfg outbox.Config) DrainOption {
	return func(c *drainConfig) { c.cfg, c.hasCfg = cfg, true }
}

// Drain delivers every message of r's event types that is due on db, in the calling goroutine:
// it claims them, calls their handlers one at a time and records each result, exactly as a
// Worker does (payload decoding, middleware, outbox.Once, the release of an ordering key's next
// message), then delivers the messages the handlers enqueued, until none is due. It never waits
// for a poll; it ignores rate limits, concurrency limits and the circuit (it handles one
// message at a time). A message retried with a backoff is no longer due and stays PENDING,
// unless RetriesNow. Messages of an ordering key are delivered in its order.
//
// Drain fails tb (Fatalf) when ctx ends first, when the database fails, or when r is not a
// router a Worker accepts. A handler's context ends with ctx; one that ignores it holds Drain
// until it returns. db's DSN needs parseTime=true and loc=UTC, as a Worker's does (Open's
// has them).
func Drain(ctx context.Context, tb testing.TB, db *sql.DB, r *outbox.Router, opts ...DrainOption) DrainResult {
	tb.Helper()
	var c drainConfig
	for _, o := range opts {
		o(&c)
	}
	if !c.hasCfg {
		c.cfg.Logger = slog.New(slog.NewTextHandler(tbWriter{tb}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	w, err := outbox.NewWorkerContext(ctx, db, r, c.cfg)
	if err != nil {
		tb.Fatalf("outboxtest: Drain: %v", err)
		return DrainResult{}
	}
	counts, err := w.Drain(ctx, outbox.DrainOptions{RetryNow: c.retryNow})
	res := DrainResult(counts)
	if err != nil {
		tb.Fatalf("outboxtest: Drain: %v (by then %d sent, %d retried, %d failed)", err, res.Sent, res.Retried, res.Failed)
	}
	return res
}

// tbWriter sends the worker's log lines to the test's log, where they appear with the failing
// test. slog's text handler quotes every value, so a handler's error text stays on its line.
type tbWriter struct{ tb testing.TB }

func (w tbWriter) Write(p []byte) (int, error) {
	w.tb.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}
