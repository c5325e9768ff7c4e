package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/internal/testdb"
	"github.com/outboxgen/outboxgen/queries"
)

// v1DB is a database with the tables of the first release (testdata/schema_v1.sql is
// queries/schema.sql as it was then, frozen).
func v1DB(t *testing.T) *testdb.DB {
	t.Helper()
	b, err := os.ReadFile("testdata/schema_v1.sql")
	if err != nil {
		t.Fatal(err)
	}
	d := testdb.New(t)
	for _, stmt := range queries.Split(string(b)) {
		d.MustExec(t, stmt)
	}
	return d
}

func tableVersions(t *testing.T, d *testdb.DB) map[string]string {
	t.Helper()
	rows, err := d.Query("SELECT TABLE_NAME, TABLE_COMMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var name, comment string
		if err := rows.Scan(&name, &comment); err != nil {
			t.Fatal(err)
		}
		out[name] = comment
	}
	return out
}

// v1SQL is the first release's worker statements (testdata/v1_worker.sql), by sqlc query name.
func v1SQL(t testing.TB) map[string]string {
	t.Helper()
	b, err := os.ReadFile("testdata/v1_worker.sql")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, part := range strings.Split(string(b), "-- name: ")[1:] {
		head, body, _ := strings.Cut(part, "\n")
		out[strings.Fields(head)[0]] = strings.TrimSuffix(strings.TrimSpace(body), ";")
	}
	for _, name := range []string{"MessageInsert", "MessageClaimCandidates", "MessageClaimLockIDs", "MessageClaimMark",
		"MessageMarkSent", "MessageMarkRetry", "MessageMarkFailed"} {
		if out[name] == "" {
			t.Fatalf("testdata/v1_worker.sql has no %s", name)
		}
	}
	return out
}

// expandSlices gives each /*SLICE:name*/? of a frozen statement n[name] placeholders, as sqlc's
// generated code did.
func expandSlices(stmt string, n map[string]int) string {
	for name, k := range n {
		stmt = strings.Replace(stmt, "/*SLICE:"+name+"*/?", strings.Repeat(",?", k)[1:], 1)
	}
	return stmt
}

// v1Insert writes a row with the first release's Enqueue statement (its MessageInsert, max
// attempts 10): a row as a version-1 application left it.
func v1Insert(t *testing.T, d *testdb.DB, eventType, payload, key string, delay time.Duration) MessageID {
	t.Helper()
	res := d.MustExec(t, v1SQL(t)["MessageInsert"], eventType, payload, key, 10, delay.Microseconds())
	id, err := res.LastInsertId()
	if err != nil {
		t.Fatal(err)
	}
	return MessageID(id)
}

// v1Claimed is a row a version-1 claim took.
type v1Claimed struct {
	id                   MessageID
	eventType, payload   string
	attempt, maxAttempts int
	token                string
}

// v1Worker is the first release's worker as the database saw it, sending that release's
// statements (testdata/v1_worker.sql): today's Worker refuses version-1 tables, so this is how
// a fleet still running release 1 meets Migrate. Its claim is one READ COMMITTED transaction
// (MessageClaimCandidates from the start of the claim index, MessageClaimLockIDs on them,
// MessageClaimMark with a fresh token and the lease) and each result is a fenced write of its
// own (MessageMarkSent, MessageMarkRetry with no backoff, MessageMarkFailed), under autocommit
// as release 1 wrote a lone result. Left out, as the database does not see them: prefetch,
// batching several results in one transaction, the candidate windows past the first and the
// fallback claim by index scan (only claims held by other claimers reach those).
type v1Worker struct {
	t      testing.TB
	db     *sql.DB
	sql    map[string]string
	types  []string
	lease  time.Duration
	handle func(v1Claimed) Outcome

	claims   atomic.Int64 // claim transactions committed, empty ones included
	handlers sync.WaitGroup
	mu       sync.Mutex
	handled  map[MessageID]int   // deliveries by this worker
	landed   map[MessageID]int64 // rows changed by each message's latest result write
}

// start runs the claim loop until stop; stop then waits for the handlers in flight and their
// result writes.
func (v *v1Worker) start() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			got, err := v.claim(10)
			if err != nil {
				// Release 1 logged "claim failed" and tried again at its next poll.
				v.t.Logf("version-1 claim: %v", err)
			}
			for _, c := range got {
				v.handlers.Add(1)
				go func() {
					defer v.handlers.Done()
					v.dispatch(c)
				}()
			}
			if len(got) == 0 {
				select {
				case <-ctx.Done():
				case <-time.After(20 * time.Millisecond):
				}
			}
		}
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			<-done
			v.handlers.Wait()
		})
	}
	v.t.Cleanup(stop)
	return stop
}

func (v *v1Worker) claim(n int) (_ []v1Claimed, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tx, err := v.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	types := make([]any, len(v.types))
	for i, et := range v.types {
		types[i] = et
	}
	from := time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC) // release 1's claimFromStart
	args := append(append([]any{from, from, int64(0)}, types...), 2*n)
	rows, err := tx.QueryContext(ctx, expandSlices(v.sql["MessageClaimCandidates"], map[string]int{"event_types": len(types)}), args...)
	if err != nil {
		return nil, fmt.Errorf("claim candidates: %w", err)
	}
	var ids []any
	for rows.Next() {
		var id int64
		var due time.Time
		if err := rows.Scan(&id, &due); err != nil {
			rows.Close()
			return nil, err
		}
		ids = append(ids, id)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, fmt.Errorf("claim candidates: %w", err)
	}
	var got []v1Claimed
	if len(ids) > 0 {
		args = append(append(append([]any{}, ids...), types...), n)
		rows, err = tx.QueryContext(ctx, expandSlices(v.sql["MessageClaimLockIDs"], map[string]int{"ids": len(ids), "event_types": len(types)}), args...)
		if err != nil {
			return nil, fmt.Errorf("claim lock: %w", err)
		}
		for rows.Next() {
			var c v1Claimed
			var key string
			var created, due time.Time
			if err := rows.Scan(&c.id, &c.eventType, &c.payload, &key, &c.attempt, &c.maxAttempts, &created, &due); err != nil {
				rows.Close()
				return nil, err
			}
			c.attempt++
			got = append(got, c)
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return nil, fmt.Errorf("claim lock: %w", err)
		}
	}
	if len(got) > 0 {
		token := newToken()
		args = []any{v.lease.Microseconds(), token}
		for i := range got {
			got[i].token = token
			args = append(args, int64(got[i].id))
		}
		res, err := tx.ExecContext(ctx, expandSlices(v.sql["MessageClaimMark"], map[string]int{"ids": len(got)}), args...)
		if err != nil {
			return nil, fmt.Errorf("claim mark: %w", err)
		}
		if marked, _ := res.RowsAffected(); marked != int64(len(got)) {
			return nil, fmt.Errorf("claim mark: %d of %d locked rows changed", marked, len(got))
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("commit claim: %w", err)
	}
	v.claims.Add(1)
	return got, nil
}

// dispatch runs the handler and writes its result, fenced on the claim's token; a write that
// fails (a lock wait during an ALTER, say) is tried again, as release 1 kept a result until it
// was written.
func (v *v1Worker) dispatch(c v1Claimed) {
	v.mu.Lock()
	v.handled[c.id]++
	v.mu.Unlock()
	outcome := v.handle(c)
	var stmt string
	var args []any
	switch outcome {
	case OutcomeSent:
		stmt, args = expandSlices(v.sql["MessageMarkSent"], map[string]int{"ids": 1}), []any{c.token, int64(c.id)}
	case OutcomeRetried:
		stmt, args = v.sql["MessageMarkRetry"], []any{int64(0), fmt.Sprintf("attempt %d of %d: try again", c.attempt, c.maxAttempts), int64(c.id), c.token}
	case OutcomeFailed:
		stmt, args = v.sql["MessageMarkFailed"], []any{fmt.Sprintf("attempt %d of %d: bounced", c.attempt, c.maxAttempts), int64(c.id), c.token}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := v.db.Exec(stmt, args...)
		if err == nil {
			n, _ := res.RowsAffected()
			v.mu.Lock()
			v.landed[c.id] = n
			v.mu.Unlock()
			return
		}
		if time.Now().After(deadline) {
			v.t.Errorf("version-1 result write for message %d: %v", c.id, err)
			return
		}
		v.t.Logf("version-1 result write for message %d: %v (trying again)", c.id, err)
		time.Sleep(50 * time.Millisecond)
	}
}

func (v *v1Worker) handledBy(id MessageID) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.handled[id]
}

func (v *v1Worker) landedOf(id MessageID) (int64, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	n, ok := v.landed[id]
	return n, ok
}

// schemaSnapshot is every table's SHOW CREATE TABLE and every message row.
func schemaSnapshot(t *testing.T, d *testdb.DB) (map[string]string, map[MessageID]row) {
	t.Helper()
	tables := map[string]string{}
	for name := range tableVersions(t, d) {
		var n, ddl string
		if err := d.QueryRow("SHOW CREATE TABLE "+name).Scan(&n, &ddl); err != nil {
			t.Fatal(err)
		}
		tables[name] = ddl
	}
	rows := map[MessageID]row{}
	ids, err := d.Query("SELECT id FROM outbox_messages")
	if err != nil {
		t.Fatal(err)
	}
	defer ids.Close()
	for ids.Next() {
		var id int64
		if err := ids.Scan(&id); err != nil {
			t.Fatal(err)
		}
		rows[MessageID(id)] = getRow(t, d, MessageID(id))
	}
	return tables, rows
}
