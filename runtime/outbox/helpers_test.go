package outbox

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/internal/testdb"
)

// row is one outbox_messages row as the tests inspect it.
type row struct {
	ID            int64
	EventType     string
	Payload       string
	Key           string
	Status        string
	Attempts      int
	MaxAttempts   int
	NextAttemptAt time.Time
	ClaimedAt     sql.NullTime
	ReclaimAfter  sql.NullTime
	ClaimToken    sql.NullString
	LastError     sql.NullString
	CreatedAt     time.Time
	SentAt        sql.NullTime
	FailedAt      sql.NullTime
}

// Test fixtures read rows with plain SQL: the code under test goes through sqlc, the checks do not.
func getRow(t testing.TB, db DBTX, id MessageID) row {
	t.Helper()
	var r row
	err := db.QueryRowContext(context.Background(), `SELECT id, event_type, payload, idempotency_key, status,
		attempts, max_attempts, next_attempt_at, claimed_at, reclaim_after, claim_token, last_error,
		created_at, sent_at, failed_at FROM outbox_messages WHERE id = ?`, int64(id)).Scan(
		&r.ID, &r.EventType, &r.Payload, &r.Key, &r.Status, &r.Attempts, &r.MaxAttempts, &r.NextAttemptAt,
		&r.ClaimedAt, &r.ReclaimAfter, &r.ClaimToken, &r.LastError, &r.CreatedAt, &r.SentAt, &r.FailedAt)
	if err != nil {
		t.Fatalf("read row %d: %v", id, err)
	}
	return r
}

func countRows(t testing.TB, db DBTX, where string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM outbox_messages WHERE "+where, args...).Scan(&n); err != nil {
		t.Fatalf("count %s: %v", where, err)
	}
	return n
}

func dbNow(t testing.TB, db DBTX) time.Time {
	t.Helper()
	var now time.Time
	if err := db.QueryRowContext(context.Background(), "SELECT UTC_TIMESTAMP(6)").Scan(&now); err != nil {
		t.Fatalf("db now: %v", err)
	}
	return now
}

// enqueueN commits n messages of eventType with payloads {"n": i}.
func enqueueN(t testing.TB, db *sql.DB, eventType string, n int, opts ...EnqueueOption) []MessageID {
	t.Helper()
	ids := make([]MessageID, 0, n)
	ctx := context.Background()
	for start := 0; start < n; start += 500 {
		err := InTx(ctx, db, func(tx *sql.Tx) error {
			for i := start; i < start+500 && i < n; i++ {
				id, err := Enqueue(ctx, tx, Message{EventType: eventType, Payload: []byte(`{"n":` + itoa(i) + `}`)}, opts...)
				if err != nil {
					return err
				}
				ids = append(ids, id)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("enqueue: %v", err)
		}
	}
	return ids
}

func itoa(i int) string {
	const digits = "0123456789"
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{digits[i%10]}, b...)
	}
	return string(b)
}

func migrated(t testing.TB) *testdb.DB { return testdb.Migrated(t) }

// sessionStatus reads one SHOW SESSION STATUS counter; db must be a single session (a *sql.Conn,
// or a pool limited to one connection) for the counter to be that session's.
func sessionStatus(t testing.TB, db DBTX, name string) int {
	t.Helper()
	var got string
	var n int
	if err := db.QueryRowContext(context.Background(), "SHOW SESSION STATUS LIKE '"+name+"'").Scan(&got, &n); err != nil {
		t.Fatalf("session status %s: %v", name, err)
	}
	return n
}
