package outbox

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/internal/testdb"
)

func TestEnqueueValidates(t *testing.T) {
	db := migrated(t)
	ctx := context.Background()
	cases := []struct {
		name string
		m    Message
		want string
	}{
		{"empty type", Message{Payload: []byte(`{}`)}, "empty EventType"},
		{"invalid json", Message{EventType: "e", Payload: []byte(`{`)}, "not valid JSON"},
		{"nil payload", Message{EventType: "e"}, "not valid JSON"},
		{"negative attempts", Message{EventType: "e", Payload: []byte(`{}`), MaxAttempts: -1}, "MaxAttempts"},
	}
	for _, c := range cases {
		_, err := Enqueue(ctx, db, c.m)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want it to mention %q", c.name, err, c.want)
		}
	}
	if n := countRows(t, db, "1=1"); n != 0 {
		t.Fatalf("invalid messages inserted %d rows", n)
	}
}

func TestEnqueueCommitAndRollback(t *testing.T) {
	db := migrated(t)
	ctx := context.Background()

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Enqueue(ctx, tx, Message{EventType: "rolled_back", Payload: []byte(`{"a":1}`)}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if n := countRows(t, db, "event_type = 'rolled_back'"); n != 0 {
		t.Fatalf("rolled-back enqueue left %d rows", n)
	}

	before := dbNow(t, db)
	var id MessageID
	err = InTx(ctx, db.DB, func(tx *sql.Tx) error {
		var err error
		id, err = Enqueue(ctx, tx, Message{EventType: "committed", Payload: []byte(`{"a": 1}`), IdempotencyKey: "k1"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	r := getRow(t, db, id)
	if r.Status != "PENDING" || r.Attempts != 0 || r.MaxAttempts != DefaultMaxAttempts || r.Key != "k1" || r.Payload != `{"a": 1}` {
		t.Fatalf("row = %+v, want PENDING, 0 attempts, max %d, key k1, payload verbatim", r, DefaultMaxAttempts)
	}
	if r.CreatedAt.Before(before) || !r.NextAttemptAt.Equal(r.CreatedAt) || r.CreatedAt.Location() != time.UTC {
		t.Fatalf("created_at %v next_attempt_at %v, want both = db now (>= %v), UTC", r.CreatedAt, r.NextAttemptAt, before)
	}

	id2 := enqueueN(t, db.DB, "delayed", 1, Delay(time.Hour))[0]
	r2 := getRow(t, db, id2)
	if d := r2.NextAttemptAt.Sub(r2.CreatedAt); d != time.Hour {
		t.Fatalf("Delay(1h): next_attempt_at - created_at = %v", d)
	}
}

func TestInTxRollsBackOnErrorAndPanic(t *testing.T) {
	db := migrated(t)
	ctx := context.Background()
	boom := errors.New("boom")
	err := InTx(ctx, db.DB, func(tx *sql.Tx) error {
		if _, err := Enqueue(ctx, tx, Message{EventType: "intx_err", Payload: []byte(`{}`)}); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("InTx err = %v, want boom", err)
	}
	func() {
		defer func() {
			if p := recover(); p != "panic in fn" {
				t.Fatalf("recovered %v, want the fn's panic to continue", p)
			}
		}()
		_ = InTx(ctx, db.DB, func(tx *sql.Tx) error {
			if _, err := Enqueue(ctx, tx, Message{EventType: "intx_panic", Payload: []byte(`{}`)}); err != nil {
				return err
			}
			panic("panic in fn")
		})
	}()
	if n := countRows(t, db, "event_type IN ('intx_err', 'intx_panic')"); n != 0 {
		t.Fatalf("InTx kept %d rows after error/panic", n)
	}
	// The pool must still work: no connection left inside an open transaction.
	if n := countRows(t, db, "1=1"); n != 0 {
		t.Fatalf("rows = %d", n)
	}
}

func TestPermanentAndRetryAfter(t *testing.T) {
	base := errors.New("base")
	if Permanent(nil) != nil || RetryAfter(time.Second, nil) != nil {
		t.Fatal("Permanent(nil) and RetryAfter(d, nil) must be nil")
	}
	p := Permanent(base)
	if !IsPermanent(p) || !errors.Is(p, base) || IsPermanent(base) {
		t.Fatalf("Permanent: IsPermanent=%v errors.Is=%v", IsPermanent(p), errors.Is(p, base))
	}
	r := RetryAfter(3*time.Second, base)
	if d, ok := retryDelay(r); !ok || d != 3*time.Second || !errors.Is(r, base) {
		t.Fatalf("RetryAfter: delay %v %v", d, ok)
	}
	if _, ok := retryDelay(base); ok {
		t.Fatal("retryDelay on a plain error")
	}
}

func TestMigrateIdempotentAndChecksDSN(t *testing.T) {
	d := testdb.New(t)
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		if err := Migrate(ctx, d.DB); err != nil {
			t.Fatalf("Migrate #%d: %v", i+1, err)
		}
	}
	if n := countRows(t, d, "1=1"); n != 0 {
		t.Fatal("empty table expected")
	}
	if !strings.Contains(Schema(), "CREATE TABLE IF NOT EXISTS outbox_messages") {
		t.Fatal("Schema() does not contain the outbox_messages DDL")
	}

	noParse := strings.Replace(d.DSN, "parseTime=true", "parseTime=false", 1)
	if noParse == d.DSN {
		t.Fatalf("test DSN %q has no parseTime=true to remove", d.DSN)
	}
	db2, err := sql.Open("mysql", noParse)
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	if err := Migrate(ctx, db2); err == nil || !strings.Contains(err.Error(), "parseTime=true") {
		t.Fatalf("Migrate without parseTime: err = %v, want it to name parseTime=true", err)
	}

	// FormatDSN leaves loc out when it is UTC (the default), so append another zone.
	local := d.DSN + "&loc=Asia%2FSeoul"
	db3, err := sql.Open("mysql", local)
	if err != nil {
		t.Fatal(err)
	}
	defer db3.Close()
	if err := Migrate(ctx, db3); err == nil || !strings.Contains(err.Error(), "loc=UTC") {
		t.Fatalf("Migrate with loc=Asia/Seoul: err = %v, want it to name loc=UTC", err)
	}
}

// Enqueue writes its values as hex literals in one statement: every byte must arrive as sent,
// whatever the DSN does with arguments or backslashes, and no statement may be prepared.
func TestEnqueueStoresValuesExactly(t *testing.T) {
	db := migrated(t)
	ctx := context.Background()
	payload := []byte(`{"s":"it's \"quoted\" \\ back\\\\slash ? ?? %s _ \u0000 ✓ 日本 😀","n":[1,2.5e3,null]}`)
	key := `k'ey" \ \\ ? ' OR 1=1 -- 😀`
	big := []byte(`{"pad":"` + strings.Repeat(`x\"'?`, maxInlineBytes/5+10) + `"}`)
	for _, suffix := range []string{"", "&interpolateParams=true", "&sql_mode=%27NO_BACKSLASH_ESCAPES,STRICT_TRANS_TABLES%27"} {
		pool, err := sql.Open("mysql", db.DSN+suffix)
		if err != nil {
			t.Fatal(err)
		}
		conn, err := pool.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		prepares := func() int { return sessionStatus(t, conn, "Com_stmt_prepare") }
		before := prepares()
		id, err := Enqueue(ctx, conn, Message{EventType: "exact?type'", Payload: payload, IdempotencyKey: key}, Standalone())
		if err != nil {
			t.Fatalf("DSN suffix %q: %v", suffix, err)
		}
		if n := prepares() - before; n != 0 {
			t.Errorf("DSN suffix %q: Enqueue prepared %d statements, want 0 (one round trip)", suffix, n)
		}
		bigID, err := Enqueue(ctx, conn, Message{EventType: "exact", Payload: big, IdempotencyKey: key}, Standalone())
		if err != nil {
			t.Fatalf("DSN suffix %q: large payload: %v", suffix, err)
		}
		conn.Close()
		pool.Close()
		got := getRow(t, db, id)
		if got.EventType != "exact?type'" || got.Payload != string(payload) || got.Key != key {
			t.Errorf("DSN suffix %q: stored (%q, %q, %q), want (%q, %q, %q)", suffix, got.EventType, got.Payload, got.Key, "exact?type'", payload, key)
		}
		if g := getRow(t, db, bigID); g.Payload != string(big) || g.Key != key {
			t.Errorf("DSN suffix %q: large payload stored %d bytes, want %d", suffix, len(g.Payload), len(big))
		}
	}
}

func TestInlineArgsRefusesMismatches(t *testing.T) {
	if _, err := inlineArgs("SELECT ?, ?", []any{int64(1)}); err == nil {
		t.Error("2 placeholders, 1 argument: no error")
	}
	if _, err := inlineArgs("SELECT ?", []any{1.5}); err == nil {
		t.Error("float argument: no error")
	}
	got, err := inlineArgs("SELECT ?, ?, ?", []any{"a'", int32(-7), []byte{0, 0xff}})
	if want := "SELECT X'6127', -7, X'00ff'"; err != nil || got != want {
		t.Errorf("inlineArgs = %q, %v; want %q", got, err, want)
	}
}

func TestInlineArgsNullAndTime(t *testing.T) {
	at := time.Date(2026, 12, 2, 21, 30, 5, 123456000, time.FixedZone("x", 3600))
	got, err := inlineArgs("? ? ?", []any{sql.NullString{}, sql.NullString{String: "t", Valid: true}, at})
	if want := "NULL X'74' '2026-12-02 20:30:05.123456'"; err != nil || got != want {
		t.Errorf("inlineArgs = %q, %v; want %q", got, err, want)
	}
}
