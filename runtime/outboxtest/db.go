package outboxtest

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/runtime/internal/store"
	"github.com/outboxgen/outboxgen/runtime/outbox"
	"github.com/outboxgen/outboxgen/runtime/outboxtest/testdb"
)

// EnvDSN names the environment variable that Open reads: the server-level DSN (no database) of
// a user who may CREATE DATABASE, such as "root:secret@tcp(127.0.0.1:3306)/".
const EnvDSN = testdb.EnvDSN

// Open creates a fresh database for tb on the server that OUTBOX_TEST_DSN names, applies the
// outboxgen schema with outbox.Migrate, and returns a pool on it (parseTime=true, loc=UTC, as a
// Worker needs). The database is dropped when the test ends (OUTBOX_TEST_KEEP=1 keeps it for a
// look). Without OUTBOX_TEST_DSN the test is skipped, saying why. Each test gets its own
// database, so tests may run in parallel; a test creates its own tables on it.
func Open(tb testing.TB) *sql.DB {
	tb.Helper()
	d := testdb.New(tb)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := outbox.Migrate(ctx, d.DB); err != nil {
		tb.Fatalf("outboxtest: Open: %v", err)
	}
	return d.DB
}

// resetTables are the statements that Reset runs, one per table that outbox.Migrate creates.
var resetTables = []struct {
	table string
	reset func(context.Context, store.DBTX) error
}{
	{"outbox_ordering_queue", store.New().TestkitResetOrderingQueue},
	{"outbox_ordering", store.New().TestkitResetOrdering},
	{"outbox_messages", store.New().TestkitResetMessages},
	{"outbox_inbox", store.New().TestkitResetInbox},
	{"outbox_job_runs", store.New().TestkitResetJobRuns},
	{"outbox_pauses", store.New().TestkitResetPauses},
	{"outbox_rate_limits", store.New().TestkitResetRateLimits},
}

// Reset deletes every row of every table that outbox.Migrate creates (messages, the inbox of
// outbox.Once, job runs, ordering keys and their queues, pauses, rate limits), for tests that share one database; a
// database of Open needs none. It uses DELETE, not TRUNCATE, so it works inside a transaction,
// and fails tb on an error. No Worker may be running on the database meanwhile.
func Reset(tb testing.TB, db outbox.DBTX) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, t := range resetTables {
		if err := t.reset(ctx, noPrepare{db}); err != nil {
			tb.Fatalf("outboxtest: Reset: %s: %v", t.table, err)
		}
	}
}
