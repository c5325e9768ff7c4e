package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/outboxgen/outboxgen/internal/testdb"
)

// EnqueueX(ctx, db, ...) with the pool compiles and autocommits: the message would be committed
// whether or not the business transaction is. Refused unless Standalone says it is meant.
func TestEnqueueRefusesAPoolUnlessStandalone(t *testing.T) {
	t.Parallel()
	d := migrated(t)
	ctx := context.Background()
	m := Message{EventType: "welcome_email", Payload: json.RawMessage(`{}`)}
	for name, pool := range map[string]DBTX{"*sql.DB": d.DB, "a type embedding *sql.DB": d} {
		_, err := Enqueue(ctx, pool, m)
		if err == nil || !strings.Contains(err.Error(), "would commit on its own, whether or not your business change does") {
			t.Errorf("Enqueue on %s: err = %v, want the dual-write refusal", name, err)
		}
	}
	if n := countRows(t, d, "1=1"); n != 0 {
		t.Fatalf("refused enqueues wrote %d rows", n)
	}
	if _, err := Enqueue(ctx, d.DB, m, Standalone()); err != nil {
		t.Errorf("Enqueue on *sql.DB with Standalone: %v", err)
	}
	// A transaction, and a *sql.Conn (which may be inside one), keep working.
	if err := InTx(ctx, d.DB, func(tx *sql.Tx) error { _, err := Enqueue(ctx, tx, m); return err }); err != nil {
		t.Errorf("Enqueue on *sql.Tx: %v", err)
	}
	conn, err := d.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := Enqueue(ctx, conn, m); err != nil {
		t.Errorf("Enqueue on *sql.Conn: %v", err)
	}
}

func TestEnqueueTypedNilTx(t *testing.T) {
	var tx *sql.Tx // BeginTx failed and its error was ignored
	_, err := Enqueue(context.Background(), tx, Message{EventType: "e", Payload: json.RawMessage(`{}`)})
	if err == nil || !strings.Contains(err.Error(), "nil tx") {
		t.Errorf("Enqueue with a nil *sql.Tx: err = %v, want a nil-tx error (not a panic)", err)
	}
}

// InTx when fn committed the transaction itself: everything is committed, so the error must be
// the distinct ErrTxEnded (do not retry), not an ordinary commit failure.
func TestInTxWhenFnCommitsItself(t *testing.T) {
	t.Parallel()
	d := migrated(t)
	ctx := context.Background()
	err := InTx(ctx, d.DB, func(tx *sql.Tx) error {
		if _, err := Enqueue(ctx, tx, Message{EventType: "e", Payload: json.RawMessage(`{}`)}); err != nil {
			return err
		}
		return tx.Commit()
	})
	if !errors.Is(err, ErrTxEnded) || !errors.Is(err, sql.ErrTxDone) {
		t.Errorf("InTx with fn committing: err = %v, want ErrTxEnded (wrapping sql.ErrTxDone)", err)
	}
	if n := countRows(t, d, "1=1"); n != 1 {
		t.Errorf("%d rows after fn committed, want 1", n)
	}
}

// A worker started before the tables exist says what to do once, instead of logging "doesn't
// exist" at every poll; Stats (outboxgen status) says the same.
func TestMissingTablesSayRunMigrate(t *testing.T) {
	t.Parallel()
	d := testdb.New(t)
	r := NewRouter()
	r.Handle("e", Policy{}, func(context.Context, json.RawMessage, Delivery) error { return nil })
	_, err := NewWorker(d.DB, r, Config{})
	if err == nil || !strings.Contains(err.Error(), "run outboxgen migrate, or outbox.Migrate") {
		t.Errorf("NewWorker without tables: err = %v, want the migrate hint", err)
	}
	_, err = Stats(context.Background(), d)
	if err == nil || !strings.Contains(err.Error(), "run outboxgen migrate, or outbox.Migrate") {
		t.Errorf("Stats without tables: err = %v, want the migrate hint", err)
	}
}

// Without parseTime, ListFailed gives NewWorker's message, not a raw Scan error.
func TestListFailedWithoutParseTime(t *testing.T) {
	t.Parallel()
	d := migrated(t)
	d.MustExec(t, "INSERT INTO outbox_messages (event_type, payload, status, attempts, max_attempts, next_attempt_at, created_at, failed_at) VALUES ('e', '{}', 'FAILED', 1, 1, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))")
	db, err := sql.Open("mysql", strings.Replace(d.DSN, "parseTime=true", "parseTime=false", 1))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, err = ListFailed(context.Background(), db, Filter{}, 10)
	if err == nil || !strings.Contains(err.Error(), "DSN must set parseTime=true") {
		t.Errorf("ListFailed without parseTime: err = %v, want the parseTime hint", err)
	}
}

// MariaDB's sql_mode EMPTY_STRING_IS_NULL turns an empty string literal into NULL: an empty
// DEFAULT made Migrate fail.
// MySQL has no such mode (setting it is an error there), so the test needs MariaDB.
func TestEmptyStringIsNullMode(t *testing.T) {
	t.Parallel()
	d := testdb.New(t)
	if _, err := d.Exec("SET SESSION sql_mode = 'EMPTY_STRING_IS_NULL'"); err != nil {
		t.Skipf("this server has no sql_mode EMPTY_STRING_IS_NULL (MySQL): %v", err)
	}
	db, err := sql.Open("mysql", d.DSN+"&sql_mode=%27EMPTY_STRING_IS_NULL,STRICT_TRANS_TABLES%27")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if err := Migrate(ctx, db); err != nil {
		t.Fatalf("Migrate under EMPTY_STRING_IS_NULL: %v", err)
	}
	// An empty idempotency key, inline and as an argument (payloads over the inline limit).
	big := json.RawMessage(`{"p":"` + strings.Repeat("x", maxInlineBytes) + `"}`)
	for _, p := range []json.RawMessage{json.RawMessage(`{}`), big} {
		if _, err := Enqueue(ctx, db, Message{EventType: "e", Payload: p}, Standalone()); err != nil {
			t.Errorf("Enqueue of %d bytes with an empty key under EMPTY_STRING_IS_NULL: %v", len(p), err)
		}
	}
}
