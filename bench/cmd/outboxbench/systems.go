package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// system is one contender: the limit (no outbox), outboxgen, or watermill-sql. The workloads
// drive every system through the same methods, so the only difference is the outbox.
type system interface {
	name() string
	// setup creates the system's tables in a fresh database.
	setup(ctx context.Context, db *sql.DB) error
	// enqueue adds one message to the caller's transaction (L0: nothing).
	enqueue(ctx context.Context, tx *sql.Tx, payload []byte) error
	// enqueueBatch adds many messages to one transaction (preloading a backlog).
	enqueueBatch(ctx context.Context, tx *sql.Tx, payloads [][]byte) error
	// inTx runs fn in a business transaction the way the system's docs say to; outboxgen's
	// InTx also wakes the workers of this process after the commit.
	inTx(ctx context.Context, db *sql.DB, fn func(tx *sql.Tx) error) error
	// consume starts one consumer on db; every handled payload goes to onMsg after the
	// handler delay. stop ends it gracefully and returns its error, if any.
	consume(ctx context.Context, db *sql.DB, c consumerConfig, onMsg func([]byte)) (stop func() error, err error)
	// verifyDrained checks in the database that every message is recorded as done.
	verifyDrained(ctx context.Context, db *sql.DB, n int) error
	// countMessages counts the messages stored (L0: the business rows).
	countMessages(ctx context.Context, db *sql.DB) (int64, error)
}

func countRows(ctx context.Context, db *sql.DB, table string) (int64, error) {
	var n int64
	err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+table).Scan(&n)
	return n, err
}

// consumerConfig is what a workload asks of a consumer.
type consumerConfig struct {
	HandlerDelay time.Duration // 0: no-op handler
	// PollInterval overrides the system's default when non-zero (the defaults are what the
	// table reports; see W3).
	PollInterval time.Duration
}

// plainTx begins, runs fn and commits: what the limit and watermill do.
func plainTx(ctx context.Context, db *sql.DB, fn func(tx *sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(tx); err != nil {
		if rerr := tx.Rollback(); rerr != nil {
			return errors.Join(err, fmt.Errorf("rollback: %w", rerr))
		}
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// limitSystem is L0: the business transaction with no outbox at all.
type limitSystem struct{}

func (limitSystem) name() string { return "L0" }
func (limitSystem) setup(ctx context.Context, db *sql.DB) error {
	_, err := db.ExecContext(ctx, bizDDL)
	return err
}
func (limitSystem) enqueue(context.Context, *sql.Tx, []byte) error        { return nil }
func (limitSystem) enqueueBatch(context.Context, *sql.Tx, [][]byte) error { return nil }
func (limitSystem) inTx(ctx context.Context, db *sql.DB, fn func(tx *sql.Tx) error) error {
	return plainTx(ctx, db, fn)
}
func (limitSystem) consume(context.Context, *sql.DB, consumerConfig, func([]byte)) (func() error, error) {
	return nil, errors.New("L0 has no consumer")
}
func (limitSystem) verifyDrained(context.Context, *sql.DB, int) error { return nil }
func (limitSystem) countMessages(ctx context.Context, db *sql.DB) (int64, error) {
	return countRows(ctx, db, "biz")
}

// systemByName finds a system for the child process.
func systemByName(n string) (system, error) {
	for _, s := range allSystems() {
		if s.name() == n {
			return s, nil
		}
	}
	return nil, fmt.Errorf("unknown system %q", n)
}

func allSystems() []system {
	return []system{limitSystem{}, oursSystem{}, watermillSystem{}}
}
