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
	// InTx also wakes the workers of this process after the commit. fn gets the context to
	// enqueue with (the traced variant's carries the request's span).
	inTx(ctx context.Context, db *sql.DB, fn func(ctx context.Context, tx *sql.Tx) error) error
	// consume starts one consumer on db; every handled payload goes to onMsg after the
	// handler delay. Its stop ends it gracefully and returns its error, if any.
	consume(ctx context.Context, db *sql.DB, c consumerConfig, onMsg func([]byte)) (consumer, error)
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
	// OnStart, when set, is called with the payload as each handler call begins (before the
	// handler delay; onMsg is called as it ends): the ordered drain's check that calls of one
	// key never overlap. outboxgen only.
	OnStart func(payload []byte)
}

// consumer is one running consumer.
type consumer struct {
	stop   func() error          // ends it gracefully; its error, if any
	counts func() consumerCounts // its claims (polls) so far
}

// consumerCounts are a consumer's running totals, read before and after a measured window.
type consumerCounts struct {
	// Claims: outboxgen's claim transactions, counted by its Observer (Claimed is called once
	// per claim transaction, found rows or not); watermill's polls, each a transaction around
	// one SELECT of its messages table, counted by a wrapper of the Beginner its subscriber
	// gets (countingBeginner).
	Claims int64
	Empty  int64 // claims or polls that found nothing
	// Stmts: every SQL statement the consumer's pool sent (countingConnector; see stmtCounter),
	// known only for a consumer in a child process, which has its pool to itself; -1 otherwise.
	Stmts int64
}

func (c consumerCounts) minus(o consumerCounts) consumerCounts {
	d := consumerCounts{Claims: c.Claims - o.Claims, Empty: c.Empty - o.Empty, Stmts: -1}
	if c.Stmts >= 0 && o.Stmts >= 0 {
		d.Stmts = c.Stmts - o.Stmts
	}
	return d
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
func (limitSystem) inTx(ctx context.Context, db *sql.DB, fn func(ctx context.Context, tx *sql.Tx) error) error {
	return plainTx(ctx, db, func(tx *sql.Tx) error { return fn(ctx, tx) })
}
func (limitSystem) consume(context.Context, *sql.DB, consumerConfig, func([]byte)) (consumer, error) {
	return consumer{}, errors.New("L0 has no consumer")
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

// allSystems are the systems of the table's columns; oursSystem's variants (ordered, traced)
// are rows of its outboxgen column, made by runRound.
func allSystems() []system {
	return []system{limitSystem{}, oursSystem{}, watermillSystem{}}
}
