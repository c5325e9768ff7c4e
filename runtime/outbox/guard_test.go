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
	// A transaction keeps working; a *sql.Conn outside one is a pool's connection
	// (TestEnqueueOnAConnOutsideATransaction).
	if err := InTx(ctx, d.DB, func(tx *sql.Tx) error { _, err := Enqueue(ctx, tx, m); return err }); err != nil {
		t.Errorf("Enqueue on *sql.Tx: %v", err)
	}
}

// txWrapper is what an application's own transaction type looks like: a struct embedding the
// *sql.Tx (with its helpers beside it).
type txWrapper struct{ *sql.Tx }

// Enqueue on a *sql.Conn inside BEGIN ... COMMIT/ROLLBACK, and on a type wrapping a *sql.Tx, is
// part of that transaction: refused as a pool neither, nothing visible before the commit, gone
// with a rollback, kept with a commit.
func TestEnqueueOnAConnOrATxWrapperFollowsTheTransaction(t *testing.T) {
	t.Parallel()
	d := migrated(t)
	ctx := context.Background()
	msg := func(eventType string) Message {
		return Message{EventType: eventType, Payload: json.RawMessage(`{}`)}
	}
	// rows counts eventType's rows as another connection sees them.
	rows := func(eventType string) int { return countRows(t, d, "event_type = ?", eventType) }

	conn, err := d.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, end := range []string{"ROLLBACK", "COMMIT"} {
		et := "conn_" + strings.ToLower(end)
		if _, err := conn.ExecContext(ctx, "BEGIN"); err != nil {
			t.Fatal(err)
		}
		if _, err := Enqueue(ctx, conn, msg(et)); err != nil {
			t.Fatalf("Enqueue on a *sql.Conn inside BEGIN: %v", err)
		}
		if n := rows(et); n != 0 {
			t.Errorf("*sql.Conn: %d rows visible before %s, want 0 (the enqueue committed on its own)", n, end)
		}
		if _, err := conn.ExecContext(ctx, end); err != nil {
			t.Fatal(err)
		}
		want := map[string]int{"ROLLBACK": 0, "COMMIT": 1}[end]
		if n := rows(et); n != want {
			t.Errorf("*sql.Conn: BEGIN, Enqueue, %s: %d rows, want %d", end, n, want)
		}
	}

	// A wrapper inside InTx: rolled back when fn fails, committed when it returns nil.
	errRollBack := errors.New("roll back")
	for _, fnErr := range []error{errRollBack, nil} {
		err := InTx(ctx, d.DB, func(tx *sql.Tx) error {
			if _, err := Enqueue(ctx, txWrapper{tx}, msg("wrapper_intx")); err != nil {
				return err
			}
			if n := rows("wrapper_intx"); n != 0 {
				t.Errorf("wrapper in InTx: %d rows visible before the commit, want 0", n)
			}
			return fnErr
		})
		if !errors.Is(err, fnErr) {
			t.Fatalf("InTx with Enqueue on a wrapper: err = %v, want %v", err, fnErr)
		}
	}
	if n := rows("wrapper_intx"); n != 1 {
		t.Errorf("wrapper in InTx, one rolled back and one committed: %d rows, want 1", n)
	}

	// A wrapper of a plain BeginTx.
	for _, commit := range []bool{false, true} {
		tx, err := d.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Enqueue(ctx, txWrapper{tx}, msg("wrapper_begintx")); err != nil {
			_ = tx.Rollback()
			t.Fatalf("Enqueue on a wrapper of a *sql.Tx: %v", err)
		}
		if n := rows("wrapper_begintx"); n != 0 {
			t.Errorf("wrapper of BeginTx: %d rows visible before the commit, want 0", n)
		}
		if commit {
			err = tx.Commit()
		} else {
			err = tx.Rollback()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := rows("wrapper_begintx"); n != 1 {
		t.Errorf("wrapper of BeginTx, one rolled back and one committed: %d rows, want 1", n)
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
	db := emptyStringIsNullDB(t)
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

// emptyStringIsNullDB opens a fresh database with sql_mode EMPTY_STRING_IS_NULL on every
// connection, or skips the test where the server has no such mode (MySQL: setting it is an error).
func emptyStringIsNullDB(t *testing.T) *sql.DB {
	t.Helper()
	d := testdb.New(t)
	if _, err := d.Exec("SET SESSION sql_mode = 'EMPTY_STRING_IS_NULL'"); err != nil {
		t.Skipf("this server has no sql_mode EMPTY_STRING_IS_NULL (MySQL): %v", err)
	}
	db, err := sql.Open("mysql", d.DSN+"&sql_mode=%27EMPTY_STRING_IS_NULL,STRICT_TRANS_TABLES%27")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// Under EMPTY_STRING_IS_NULL the empty quoted string that the reclaim's COALESCE fell back to
// is NULL too, which made the whole CONCAT NULL: a reclaimed row with no earlier error lost the
// reason.
// MariaDB only, like TestEmptyStringIsNullMode.
func TestEmptyStringIsNullModeReclaimSaysWhy(t *testing.T) {
	t.Parallel()
	db := emptyStringIsNullDB(t)
	ctx := context.Background()
	var mode string
	if err := db.QueryRowContext(ctx, "SELECT @@SESSION.sql_mode").Scan(&mode); err != nil || !strings.Contains(mode, "EMPTY_STRING_IS_NULL") {
		t.Fatalf("sql_mode = %q, %v; want EMPTY_STRING_IS_NULL set through the DSN", mode, err)
	}
	if err := Migrate(ctx, db); err != nil {
		t.Fatalf("Migrate under EMPTY_STRING_IS_NULL: %v", err)
	}
	r := NewRouter()
	r.Handle("lease_expires", Policy{}, func(context.Context, json.RawMessage, Delivery) error { return nil })
	w := newTestWorker(t, db, r, Config{})
	ids := enqueueN(t, db, "lease_expires", 2)
	setRow(t, db, ids[1], "last_error = ?", "handler said no")
	got, _, err := w.claim(ctx, 2, claimPos{})
	if err != nil || len(got) != 2 {
		t.Fatalf("claim: %v %v", got, err)
	}
	for _, id := range ids {
		setRow(t, db, id, "reclaim_after = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND")
	}
	if n, err := w.reclaimOnce(ctx); err != nil || n != 2 {
		t.Fatalf("reclaimOnce = %d, %v; want 2", n, err)
	}
	for i, before := range []string{"", "; the error before: handler said no"} {
		row := getRow(t, db, ids[i])
		if row.Status != "PENDING" || !row.LastError.Valid ||
			!strings.HasPrefix(row.LastError.String, "lease expired (claim ") ||
			!strings.HasSuffix(row.LastError.String, "; reclaimed for another attempt"+before) {
			t.Errorf("row with earlier error %q after reclaim: status %s, last_error %+v; want PENDING and the lease-expired reason",
				strings.TrimPrefix(before, "; the error before: "), row.Status, row.LastError)
		}
	}
}
