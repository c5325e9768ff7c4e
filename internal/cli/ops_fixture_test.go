package cli

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"testing"

	"github.com/outboxgen/outboxgen/internal/testdb"
	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// The operator commands against the real server (OUTBOX_TEST_DSN; skipped without it). Each
// test has its own database (testdb), built with outbox.Enqueue and SQL fixtures for the
// states a test cannot wait for (stuck leases, old failures).

type opsFunc func(args []string, stdout, stderr io.Writer) int

type opsResult struct {
	code           int
	stdout, stderr string
}

func runOps(fn opsFunc, args ...string) opsResult {
	var out, errb bytes.Buffer
	code := fn(args, &out, &errb)
	return opsResult{code: code, stdout: out.String(), stderr: errb.String()}
}

func (r opsResult) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

func mustExit(t *testing.T, r opsResult, want int) {
	t.Helper()
	if r.code != want {
		t.Fatalf("want exit %d, got %s", want, r)
	}
}

// fixtures writes rows directly: the times are offsets in seconds from the database clock
// (negative = in the past), NULL when nil.
type fixtures struct {
	t  *testing.T
	db *testdb.DB
}

func secs(n int) *int { return &n }

func (f fixtures) insert(eventType, status string, attempts int, created, claimed, reclaimAfter, sent, failed *int, lastError string) outbox.MessageID {
	f.t.Helper()
	ts := func(off *int) string {
		if off == nil {
			return "NULL"
		}
		return fmt.Sprintf("TIMESTAMPADD(SECOND, %d, UTC_TIMESTAMP(6))", *off)
	}
	if created == nil {
		created = secs(0)
	}
	var token, lastErr any
	if claimed != nil {
		token = "fixture"
	}
	if lastError != "" {
		lastErr = lastError
	}
	res := f.db.MustExec(f.t, `INSERT INTO outbox_messages
		(event_type, payload, status, attempts, max_attempts, next_attempt_at, claimed_at, reclaim_after,
		 claim_token, last_error, created_at, sent_at, failed_at)
		VALUES (?, '{}', ?, ?, 10, `+ts(created)+`, `+ts(claimed)+`, `+ts(reclaimAfter)+`, ?, ?, `+
		ts(created)+`, `+ts(sent)+`, `+ts(failed)+`)`, eventType, status, attempts, token, lastErr)
	id, err := res.LastInsertId()
	if err != nil {
		f.t.Fatal(err)
	}
	return outbox.MessageID(id)
}

// processing adds a claimed row: claimed ago seconds back with a lease of lease seconds.
func (f fixtures) processing(eventType string, ago, lease int) outbox.MessageID {
	f.t.Helper()
	return f.insert(eventType, "PROCESSING", 1, secs(-ago-1), secs(-ago), secs(-ago+lease), nil, nil, "")
}

func (f fixtures) failed(eventType string, ago int, lastError string) outbox.MessageID {
	f.t.Helper()
	return f.insert(eventType, "FAILED", 10, secs(-ago-60), nil, nil, nil, secs(-ago), lastError)
}

func (f fixtures) sent(eventType string, ago int) outbox.MessageID {
	f.t.Helper()
	return f.insert(eventType, "SENT", 1, secs(-ago-60), nil, nil, secs(-ago), nil, "")
}

func (f fixtures) enqueue(eventType string, opts ...outbox.EnqueueOption) outbox.MessageID {
	f.t.Helper()
	id, err := outbox.Enqueue(context.Background(), f.db, outbox.Message{EventType: eventType, Payload: json.RawMessage(`{"n":1}`)}, append(opts, outbox.Standalone())...)
	if err != nil {
		f.t.Fatalf("enqueue %s: %v", eventType, err)
	}
	return id
}

// dueSince enqueues a message that has been due, unclaimed, for ago seconds.
func (f fixtures) dueSince(eventType string, ago int) outbox.MessageID {
	f.t.Helper()
	id := f.enqueue(eventType)
	f.db.MustExec(f.t, "UPDATE outbox_messages SET created_at = TIMESTAMPADD(SECOND, ?, UTC_TIMESTAMP(6)), next_attempt_at = TIMESTAMPADD(SECOND, ?, UTC_TIMESTAMP(6)) WHERE id = ?", -ago, -ago, id)
	return id
}

func (f fixtures) status(id outbox.MessageID) (status string, attempts int, failedAt sql.NullTime) {
	f.t.Helper()
	if err := f.db.QueryRow("SELECT status, attempts, failed_at FROM outbox_messages WHERE id = ?", id).
		Scan(&status, &attempts, &failedAt); err != nil {
		f.t.Fatalf("row %d: %v", id, err)
	}
	return
}

func (f fixtures) countByStatus(status string) int {
	f.t.Helper()
	var n int
	if err := f.db.QueryRow("SELECT COUNT(*) FROM outbox_messages WHERE status = ?", status).Scan(&n); err != nil {
		f.t.Fatal(err)
	}
	return n
}
