//go:build !noworker

package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/outboxgen/outboxgen/runtime/outbox"
	"github.com/outboxgen/outboxgen/runtime/outboxotel"
)

func (o oursSystem) consume(ctx context.Context, db *sql.DB, c consumerConfig, onMsg func([]byte)) (consumer, error) {
	r := outbox.NewRouter()
	r.Handle(ourType, outbox.Policy{}, func(ctx context.Context, payload json.RawMessage, d outbox.Delivery) error {
		if c.OnStart != nil {
			c.OnStart(payload)
		}
		if c.HandlerDelay > 0 {
			time.Sleep(c.HandlerDelay)
		}
		onMsg(payload)
		return nil
	})
	obs := &claimObs{}
	// The default Config but for the bench's levers (zero values: the defaults, which is what
	// the table reports): PollInterval 1s, MinPollInterval 20ms, BatchSize 100, Concurrency 16.
	cfg := outbox.Config{
		PollInterval: c.PollInterval,
		BatchSize:    oursBatch,
		Observer:     obs,
		Concurrency:  oursConcurrency,
		// Info lines would only slow the run down; warnings and errors still reach stderr.
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	if o.traced {
		// The worker-side line of outboxotel's wiring: a CONSUMER span per handler call (first
		// middleware) and its OTel instruments next to claimObs, from the global providers.
		var err error
		if cfg, err = outboxotel.Instrument(cfg); err != nil {
			return consumer{}, err
		}
	}
	w, err := outbox.NewWorker(db, r, cfg)
	if err != nil {
		return consumer{}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	counts := func() consumerCounts {
		return consumerCounts{Claims: obs.claims.Load(), Empty: obs.empty.Load(), Stmts: -1}
	}
	return consumer{counts: counts, stop: func() error {
		cancel()
		err := <-done
		// Where a drain's time goes: claims, rows per claim and time per claim (to stderr).
		if c := obs.claims.Load(); c > 0 && os.Getenv("OUTBOXBENCH_CLAIMS") != "" {
			fmt.Fprintf(os.Stderr, "  outboxgen worker: %d claims (%d empty), %.1f rows/claim, %.2f ms/claim\n",
				c, obs.empty.Load(), float64(obs.rows.Load())/float64(c), float64(obs.claimNs.Load())/float64(c)/1e6)
		}
		return err
	}}, nil
}

// claimObs counts the worker's claims through its Observer hook.
type claimObs struct {
	outbox.NopObserver
	claims, rows, claimNs, empty atomic.Int64
}

func (o *claimObs) Claimed(n int, d time.Duration) {
	o.claims.Add(1)
	o.rows.Add(int64(n))
	o.claimNs.Add(int64(d))
	if n == 0 {
		o.empty.Add(1)
	}
}
