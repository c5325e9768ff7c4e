package outbox

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/runtime/internal/store"
)

// A worker's result write locks only its own rows: while one is held open, an application's
// enqueue commits, another claim's result write lands, and a claim still finds due rows.
// (Planned on a status index under REPEATABLE READ, the write would take next-key locks across
// every PROCESSING row and the gap where new PENDING rows go.)
func TestResultWriteLocksOnlyItsOwnRows(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	ids := enqueueN(t, db.DB, "lockscope", 300)
	int64s := func(m []MessageID) []int64 {
		out := make([]int64, len(m))
		for i, id := range m {
			out[i] = int64(id)
		}
		return out
	}
	// Two claims' rows, as two workers leave them: PROCESSING under tokens a and b.
	for tok, part := range map[string][]MessageID{"aaaa": ids[100:200], "bbbb": ids[200:300]} {
		if _, err := q.MessageClaimMark(ctx, db, store.MessageClaimMarkParams{
			LeaseUs: time.Minute.Microseconds(), ClaimToken: sql.NullString{String: tok, Valid: true}, Ids: int64s(part),
		}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Exec("ANALYZE TABLE outbox_messages"); err != nil {
		t.Fatal(err)
	}

	held, err := db.BeginTx(ctx, nil) // the worker's result-write transaction, default isolation
	if err != nil {
		t.Fatal(err)
	}
	defer held.Rollback()
	if n, err := q.MessageMarkSent(ctx, held, store.MessageMarkSentParams{
		ClaimToken: sql.NullString{String: "aaaa", Valid: true}, Ids: int64s(ids[100:150]),
	}); err != nil || n != 50 {
		t.Fatalf("held write: %d rows, %v", n, err)
	}

	other := impatientConn(t, db.DB)
	// The application's enqueue.
	tx, err := other.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Enqueue(ctx, tx, Message{EventType: "lockscope", Payload: []byte(`{}`)}); err != nil {
		tx.Rollback()
		t.Fatalf("enqueue blocked by another worker's open result write: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	// Another claim's result write.
	if n, err := q.MessageMarkSent(ctx, other, store.MessageMarkSentParams{
		ClaimToken: sql.NullString{String: "bbbb", Valid: true}, Ids: int64s(ids[200:300]),
	}); err != nil || n != 100 {
		t.Fatalf("another claim's result write: %d rows, %v (want 100, not blocked)", n, err)
	}
	// Retry and failure writes of the same claim's other rows.
	if _, err := q.MessageMarkRetry(ctx, other, store.MessageMarkRetryParams{
		ID: int64(ids[150]), ClaimToken: sql.NullString{String: "aaaa", Valid: true}, LastError: sql.NullString{String: "x", Valid: true},
	}); err != nil {
		t.Fatalf("retry write of an unlocked row: %v", err)
	}
	// A claim of the due rows.
	ctx2, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ctx2tx, err := other.BeginTx(ctx2, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		t.Fatal(err)
	}
	defer ctx2tx.Rollback()
	cands, err := q.MessageClaimCandidates(ctx2, ctx2tx, store.MessageClaimCandidatesParams{AfterDue: claimFromStart, EventTypes: []string{"lockscope"}, Limit: 20})
	if err != nil {
		t.Fatal(err)
	}
	candIDs := make([]int64, len(cands))
	for i, c := range cands {
		candIDs[i] = c.ID
	}
	rows, err := q.MessageClaimLockIDs(ctx2, ctx2tx, store.MessageClaimLockIDsParams{Ids: candIDs, EventTypes: []string{"lockscope"}, Limit: 10})
	if err != nil || len(rows) != 10 {
		t.Fatalf("claim during an open result write: %d rows, %v; want 10", len(rows), err)
	}
}

// Reclaim and Purge scan index ranges; held open, neither blocks the application's enqueue.
func TestRangeWritesDoNotBlockEnqueue(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	ids := enqueueN(t, db.DB, "rangescope", 40)
	// Some rows SENT long ago, some FAILED, some PROCESSING with expired leases.
	db.MustExec(t, "UPDATE outbox_messages SET status='SENT', sent_at = UTC_TIMESTAMP(6) - INTERVAL 30 DAY, next_attempt_at = sent_at WHERE id <= ?", int64(ids[9]))
	db.MustExec(t, "UPDATE outbox_messages SET status='FAILED', failed_at = UTC_TIMESTAMP(6) - INTERVAL 30 DAY, next_attempt_at = failed_at WHERE id > ? AND id <= ?", int64(ids[9]), int64(ids[19]))
	db.MustExec(t, "UPDATE outbox_messages SET status='PROCESSING', attempts=1, claim_token='t', claimed_at = UTC_TIMESTAMP(6) - INTERVAL 1 HOUR, reclaim_after = UTC_TIMESTAMP(6) - INTERVAL 1 MINUTE WHERE id > ? AND id <= ?", int64(ids[19]), int64(ids[29]))
	if _, err := db.Exec("ANALYZE TABLE outbox_messages"); err != nil {
		t.Fatal(err)
	}
	other := impatientConn(t, db.DB)
	enqueueWhileHeld := func(what string, write func(tx *sql.Tx) (int64, error), want int64) {
		t.Helper()
		n, err := execReadCommitted(ctx, db.DB, func(tx *sql.Tx) (int64, error) {
			n, err := write(tx)
			if err != nil {
				return n, err
			}
			etx, err := other.BeginTx(ctx, nil)
			if err != nil {
				return n, err
			}
			if _, err := Enqueue(ctx, etx, Message{EventType: "rangescope", Payload: []byte(`{}`)}); err != nil {
				etx.Rollback()
				t.Errorf("enqueue blocked while %s was open: %v", what, err)
				return n, nil
			}
			return n, etx.Commit()
		})
		if err != nil || n != want {
			t.Fatalf("%s: %d rows, %v; want %d", what, n, err, want)
		}
	}
	enqueueWhileHeld("a reclaim", func(tx *sql.Tx) (int64, error) { return q.MessageReclaimStale(ctx, tx, 1000) }, 10)
	enqueueWhileHeld("a purge of SENT", func(tx *sql.Tx) (int64, error) {
		return q.MessagePurgeSent(ctx, tx, store.MessagePurgeSentParams{OlderThanUs: (24 * time.Hour).Microseconds(), Limit: 1000})
	}, 10)
	enqueueWhileHeld("a purge of FAILED", func(tx *sql.Tx) (int64, error) {
		return q.MessagePurgeFailed(ctx, tx, store.MessagePurgeFailedParams{OlderThanUs: (24 * time.Hour).Microseconds(), Limit: 1000})
	}, 10)
}

// impatientConn is a session that gives up on a row lock after 1 s (error 1205), so a test
// sees a lock wait as an error instead of a hang. Closed when the test ends.
func impatientConn(t *testing.T, db *sql.DB) *sql.Conn {
	t.Helper()
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := conn.ExecContext(context.Background(), "SET SESSION innodb_lock_wait_timeout = 1"); err != nil {
		t.Fatal(err)
	}
	return conn
}
