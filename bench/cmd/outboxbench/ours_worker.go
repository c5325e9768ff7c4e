//go:build !noworker

package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"log/slog"
	"os"
	"time"

	"github.com/outboxgen/outboxgen/runtime/outbox"
)

func (oursSystem) consume(ctx context.Context, db *sql.DB, c consumerConfig, onMsg func([]byte)) (func() error, error) {
	r := outbox.NewRouter()
	r.Handle(ourType, outbox.Policy{}, func(ctx context.Context, payload json.RawMessage, d outbox.Delivery) error {
		if c.HandlerDelay > 0 {
			time.Sleep(c.HandlerDelay)
		}
		onMsg(payload)
		return nil
	})
	w, err := outbox.NewWorker(db, r, outbox.Config{
		PollInterval: c.PollInterval,
		// Info lines would only slow the run down; warnings and errors still reach stderr.
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	return func() error {
		cancel()
		return <-done
	}, nil
}
