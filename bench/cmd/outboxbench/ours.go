package main

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// oursSystem is outboxgen's runtime with its defaults (BatchSize 100, Concurrency 16,
// PollInterval 1s), used as its README says: outbox.Enqueue in the caller's transaction,
// outbox.InTx to commit and wake the workers of this process, one outbox.Worker per pool.
type oursSystem struct{}

const ourType = "bench.event"

// oursBatch and oursConcurrency override the worker's BatchSize and Concurrency when non-zero
// (--ours-batch, --ours-concurrency: levers to measure; the table uses the defaults).
var oursBatch, oursConcurrency int

func (oursSystem) name() string { return "outboxgen" }

func (oursSystem) setup(ctx context.Context, db *sql.DB) error {
	if _, err := db.ExecContext(ctx, bizDDL); err != nil {
		return err
	}
	return outbox.Migrate(ctx, db)
}

func (oursSystem) enqueue(ctx context.Context, tx *sql.Tx, payload []byte) error {
	_, err := outbox.Enqueue(ctx, tx, outbox.Message{EventType: ourType, Payload: payload})
	return err
}

func (o oursSystem) enqueueBatch(ctx context.Context, tx *sql.Tx, payloads [][]byte) error {
	for _, p := range payloads {
		if err := o.enqueue(ctx, tx, p); err != nil {
			return err
		}
	}
	return nil
}

func (oursSystem) inTx(ctx context.Context, db *sql.DB, fn func(tx *sql.Tx) error) error {
	return outbox.InTx(ctx, db, fn)
}

// verifyDrained checks that every row is SENT: the worker recorded each result.
func (oursSystem) verifyDrained(ctx context.Context, db *sql.DB, n int) error {
	var sent, other int64
	err := db.QueryRowContext(ctx, `SELECT
		COALESCE(SUM(status = 'SENT'), 0), COALESCE(SUM(status <> 'SENT'), 0) FROM outbox_messages`).Scan(&sent, &other)
	if err != nil {
		return err
	}
	if sent != int64(n) || other != 0 {
		return fmt.Errorf("outboxgen: %d rows SENT, %d not SENT, want %d SENT", sent, other, n)
	}
	return nil
}

func (oursSystem) countMessages(ctx context.Context, db *sql.DB) (int64, error) {
	return countRows(ctx, db, "outbox_messages")
}
