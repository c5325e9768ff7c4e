//go:build !relstub

package main

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// runWorker runs the real outbox.Worker until ctx is done.
func runWorker(ctx context.Context, db *sql.DB, pol outbox.Policy, h outbox.HandlerFunc, c workerConfig) error {
	router := outbox.NewRouter()
	for _, t := range c.Types {
		router.Handle(t, pol, h)
	}
	cfg := outbox.Config{
		BatchSize: c.BatchSize, Concurrency: c.Concurrency, PollInterval: c.PollInterval,
		StaleAfter: c.StaleAfter, ShutdownTimeout: c.ShutdownTimeout, Logger: c.Logger, Reporter: c.Reporter,
	}
	// NewWorker checks the connection; the server may be restarting when this process starts.
	for {
		w, err := outbox.NewWorker(db, router, cfg)
		if err == nil {
			return w.Run(ctx)
		}
		if errors.Is(err, outbox.ErrSchemaTooNew) { // no retry makes the tables older
			return err
		}
		c.Logger.Warn("NewWorker failed; retrying", "err", err)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(200 * time.Millisecond):
		}
	}
}
