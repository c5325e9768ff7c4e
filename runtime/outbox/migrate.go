package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/outboxgen/outboxgen/queries"
)

// Schema returns the DDL of every outboxgen table (queries/schema.sql), for users who apply
// migrations with their own tool (goose, atlas, golang-migrate). Each statement is idempotent.
func Schema() string { return queries.Schema }

// Migrate applies Schema to db, idempotently (CREATE TABLE IF NOT EXISTS), on a connection of
// its own: never on a caller's transaction, because MySQL commits DDL implicitly. It first
// checks the DSN as NewWorker does (parseTime=true, loc=UTC).
func Migrate(ctx context.Context, db *sql.DB) error {
	if db == nil {
		return errors.New("outbox: Migrate: nil db")
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("outbox: Migrate: connect: %w", err)
	}
	defer conn.Close() // returns the connection to the pool; DDL leaves no session state behind
	if err := checkClock(ctx, conn); err != nil {
		return fmt.Errorf("outbox: Migrate: %w", err)
	}
	for _, stmt := range queries.Statements() {
		if _, err := conn.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("outbox: Migrate: %w\n%s", err, stmt)
		}
	}
	return nil
}

// checkClock verifies the DSN settings the runtime relies on by scanning the database clock
// into a time.Time: without parseTime=true the driver hands back bytes and the scan fails; with
// a loc other than UTC the driver labels UTC wall times with another zone, which would shift
// every time the runtime reads.
func checkClock(ctx context.Context, db DBTX) error {
	now, err := q.ClockNow(ctx, sdb(db))
	if err != nil {
		// database/sql's conversion error is untyped; its text is stable (convertAssign):
		// "unsupported Scan, storing driver.Value type []uint8 into type *time.Time".
		if strings.Contains(err.Error(), "unsupported Scan") {
			return fmt.Errorf("DSN must set parseTime=true (scanning UTC_TIMESTAMP(6) into a time.Time failed: %w)", err)
		}
		return fmt.Errorf("connection check: %w", err)
	}
	if now.Location() != time.UTC {
		return fmt.Errorf("DSN must use loc=UTC (the driver returned times in %q)", now.Location())
	}
	return nil
}
