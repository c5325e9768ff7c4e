package outbox

import (
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// The hex literal writer encodes through a fixed buffer: strings longer than it, and of every
// length around its edges, must come out whole.
func TestInlineArgsHexOfEveryLength(t *testing.T) {
	t.Parallel()
	src := make([]byte, 1500)
	for i := range src {
		src[i] = byte(i * 7)
	}
	for n := 0; n <= len(src); n++ {
		v := src[:n]
		want := "X'" + hex.EncodeToString(v) + "'"
		got, err := inlineArgs("?,?,?", []any{string(v), v, json.RawMessage(v)})
		if err != nil || got != strings.Join([]string{want, want, want}, ",") {
			t.Fatalf("%d bytes: inlineArgs = %.80q..., %v; want %.80q... three times", n, got, err, want)
		}
		if size := inlineSize("?,?,?", []any{string(v), v, json.RawMessage(v)}); size < len(got) {
			t.Fatalf("%d bytes: inlineSize = %d, under the statement's %d", n, size, len(got))
		}
	}
}

// On database/sql's handles EnqueueMany's rows go as literals, and the server evaluates no
// expression per row: a backfill of many rows would pay for each one on every row.
func TestEnqueueManyInlineRowsEvaluateNothing(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 678901000, time.UTC)
	rows := []manyRow{
		{m: Message{EventType: "a", Payload: []byte(`{}`), MaxAttempts: 10}},
		{m: Message{EventType: "b", Payload: []byte(`{"x":1}`), IdempotencyKey: "k", OrderingKey: "o", MaxAttempts: 3}, hdr: `{"h":"v"}`, seq: 7},
	}
	marker := sql.NullString{String: "many0123", Valid: true}
	query, args := manyInsert(rows, enqueueOptions{delay: 1500 * time.Millisecond}, false, true, marker, now)
	stmt, err := inlineArgs(query, args)
	if err != nil {
		t.Fatal(err)
	}
	tuples := stmt[strings.Index(stmt, "VALUES"):]
	if strings.Contains(tuples, "(") && strings.Count(tuples, "(") != len(rows) {
		t.Errorf("the rows of the inline statement call functions:\n%s", tuples)
	}
	for _, want := range []string{"'2026-01-02 03:04:05.678901'", "'2026-01-02 03:04:07.178901'", "X'6b'", "X''", "NULL", "7", "X'" + hex.EncodeToString([]byte(`{"h":"v"}`)) + "'"} {
		if !strings.Contains(tuples, want) {
			t.Errorf("the inline statement lacks %s:\n%s", want, tuples)
		}
	}
}

// EnqueueMany's and Enqueue's inline rows keep every byte through a latin1 connection, an empty
// key under MariaDB's EMPTY_STRING_IS_NULL, and the database's UTC clock under a session time
// zone that is not UTC; a delay is added to it exactly, and without one both times are equal.
func TestEnqueueManyInlineKeepsBytesAndClock(t *testing.T) {
	t.Parallel()
	d := migrated(t)
	ctx := context.Background()
	params := "&charset=latin1&time_zone=%27%2B05%3A00%27"
	if _, err := d.Exec("SET SESSION sql_mode = 'EMPTY_STRING_IS_NULL,STRICT_TRANS_TABLES'"); err == nil {
		params += "&sql_mode=%27EMPTY_STRING_IS_NULL,STRICT_TRANS_TABLES%27" // MariaDB: MySQL has no such mode
	}
	sep := "?"
	if strings.Contains(d.DSN, "?") {
		sep = "&"
	}
	db, err := sql.Open("mysql", d.DSN+sep+strings.TrimPrefix(params, "&"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	clock := func() time.Time {
		var s string
		if err := db.QueryRow("SELECT CAST(UTC_TIMESTAMP(6) AS CHAR)").Scan(&s); err != nil {
			t.Fatal(err)
		}
		at, err := time.ParseInLocation(time.DateTime, s, time.UTC)
		if err != nil {
			t.Fatal(err)
		}
		return at
	}
	ms := []Message{
		{EventType: "many.bytes", Payload: json.RawMessage(`{"name":"Zoë Ünal 東京 😀"}`), IdempotencyKey: "ключ:😀"},
		{EventType: "many.bytes", Payload: json.RawMessage(`{"empty":"key"}`)},
	}
	// Enqueue's inline statement is held to the same: the single enqueue is the last case.
	for _, delay := range []time.Duration{0, 90*time.Second + 123456*time.Microsecond, -1} {
		before := clock()
		var ids []MessageID
		err := InTx(ctx, db, func(tx *sql.Tx) error {
			if delay < 0 {
				for _, m := range ms {
					id, err := Enqueue(ctx, tx, m, Header("x-name", "Zoë 😀"))
					if err != nil {
						return err
					}
					ids = append(ids, id)
				}
				return nil
			}
			var err error
			ids, err = EnqueueMany(ctx, tx, ms, Delay(delay), Header("x-name", "Zoë 😀"))
			return err
		})
		if err != nil {
			t.Fatalf("delay %s: %v", delay, err)
		}
		after := clock()
		for i, id := range ids {
			var payload, key, headers, created, next string
			if err := d.QueryRow(`SELECT payload, idempotency_key, headers, CAST(created_at AS CHAR), CAST(next_attempt_at AS CHAR)
				FROM outbox_messages WHERE id = ?`, id).Scan(&payload, &key, &headers, &created, &next); err != nil {
				t.Fatal(err)
			}
			if payload != string(ms[i].Payload) || key != ms[i].IdempotencyKey || !strings.Contains(headers, "Zoë 😀") {
				t.Errorf("delay %s: ms[%d] stored payload %q key %q headers %q; want the bytes enqueued", delay, i, payload, key, headers)
			}
			c, err1 := time.ParseInLocation(time.DateTime, created, time.UTC)
			n, err2 := time.ParseInLocation(time.DateTime, next, time.UTC)
			if err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
			if c.Before(before) || c.After(after) {
				t.Errorf("delay %s: ms[%d] created_at %s, not within the database's UTC clock around the call [%s, %s]", delay, i, created, before, after)
			}
			if n.Sub(c) != max(delay, 0) {
				t.Errorf("delay %s: ms[%d] next_attempt_at %s is %s after created_at %s", delay, i, next, n.Sub(c), created)
			}
		}
	}
}
