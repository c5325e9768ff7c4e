// Package testdb gives each integration test a fresh database of its own on a MySQL or MariaDB
// server, dropped when the test ends, so that tests and packages running in parallel never share
// rows. OUTBOX_TEST_DSN names the server: a server-level DSN (no database) of a user who may
// CREATE DATABASE; without it a test that asks for a database is skipped and says why.
// OUTBOX_TEST_KEEP=1 keeps each database for a look afterwards.
//
// Migrated applies the schema of this release of outboxgen. Pending, HeldKey and BrokenKey
// write rows in the shapes that a dashboard, an alert or a metrics exporter must show (a row
// written by other means than Enqueue, a key held by a failed head, a key a hand-run statement
// broke), which the runtime reaches only slowly or never.
package testdb

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/outboxgen/outboxgen/queries"
)

// EnvDSN names the environment variable holding the server-level DSN.
const EnvDSN = "OUTBOX_TEST_DSN"

// DB is one test's database.
type DB struct {
	*sql.DB
	// DSN opens another pool on the same database (for a second worker, a second process).
	DSN string
	// Name is the database name.
	Name string
	// ServerDSN is the server-level DSN (no database selected).
	ServerDSN string
}

// ServerDSN returns OUTBOX_TEST_DSN, or skips the test with a message saying how to get one.
func ServerDSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv(EnvDSN)
	if dsn == "" {
		t.Skipf("%s is not set: this integration test needs a MariaDB server; scripts/test starts one and sets it", EnvDSN)
	}
	return dsn
}

var unsafeChars = regexp.MustCompile(`[^a-z0-9_]+`)

// New creates an empty database for t, dropped when t ends.
func New(t testing.TB) *DB {
	t.Helper()
	server := ServerDSN(t)
	cfg, err := mysql.ParseDSN(server)
	if err != nil {
		t.Fatalf("testdb: parse %s: %v", EnvDSN, err)
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:]) // crypto/rand.Read never returns an error (Go 1.24+).
	base := unsafeChars.ReplaceAllString(strings.ToLower(t.Name()), "_")
	if len(base) > 40 {
		base = base[:40]
	}
	name := "t_" + base + "_" + hex.EncodeToString(rnd[:])

	admin, err := sql.Open("mysql", server)
	if err != nil {
		t.Fatalf("testdb: open server: %v", err)
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE `"+name+"`"); err != nil {
		t.Fatalf("testdb: create database %s: %v", name, err)
	}

	cfg.DBName = name
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	dsn := cfg.FormatDSN()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatalf("testdb: open %s: %v", name, err)
	}
	t.Cleanup(func() {
		db.Close()
		if os.Getenv("OUTBOX_TEST_KEEP") != "" {
			t.Logf("testdb: kept database %s", name)
			return
		}
		admin, err := sql.Open("mysql", server)
		if err != nil {
			t.Errorf("testdb: drop %s: %v", name, err)
			return
		}
		defer admin.Close()
		if _, err := admin.Exec("DROP DATABASE IF EXISTS `" + name + "`"); err != nil {
			t.Errorf("testdb: drop %s: %v", name, err)
		}
	})
	return &DB{DB: db, DSN: dsn, Name: name, ServerDSN: server}
}

// Migrated is New plus the outboxgen schema (queries/schema.sql), applied directly so that
// packages under test need not import runtime/outbox.
func Migrated(t testing.TB) *DB {
	t.Helper()
	d := New(t)
	for _, stmt := range queries.Statements() {
		if _, err := d.Exec(stmt); err != nil {
			t.Fatalf("testdb: apply schema: %v\n%s", err, stmt)
		}
	}
	return d
}

// Open opens another pool on d's database (a second worker needs its own pool).
func (d *DB) Open(t testing.TB) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", d.DSN)
	if err != nil {
		t.Fatalf("testdb: open: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// MustExec runs a statement or fails the test: for test fixtures written in SQL.
func (d *DB) MustExec(t testing.TB, query string, args ...any) sql.Result {
	t.Helper()
	res, err := d.Exec(query, args...)
	if err != nil {
		t.Fatalf("testdb: %s: %v", query, err)
	}
	return res
}

// Pending writes a PENDING row of eventType, stored as bytes, so it may be any (even not UTF-8):
// a row written by other means than Enqueue.
func (d *DB) Pending(t testing.TB, eventType string) {
	t.Helper()
	d.MustExec(t, `INSERT INTO outbox_messages (event_type, payload, status, attempts, max_attempts, next_attempt_at, created_at)
		VALUES (?, '{}', 'PENDING', 0, 10, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))`, []byte(eventType))
}

// HeldKey writes an ordering key held by a FAILED head (seq 1) with one PENDING message of
// eventType behind it (seq 2), enqueued waitedMin minutes ago, and their queue entries, the way
// the runtime leaves them; key is stored as bytes, so it may be any (even not UTF-8). It
// returns the head's id.
func (d *DB) HeldKey(t testing.TB, key, eventType string, waitedMin int) (head int64) {
	t.Helper()
	for seq := 1; seq <= 2; seq++ {
		status := "FAILED"
		if seq == 2 {
			status = "PENDING"
		}
		res := d.MustExec(t, `INSERT INTO outbox_messages (event_type, payload, status, attempts, max_attempts,
			next_attempt_at, created_at, failed_at, ordering_key, ordering_seq)
			VALUES (?, '{}', ?, 1, 1, UTC_TIMESTAMP(6), TIMESTAMPADD(MINUTE, ?, UTC_TIMESTAMP(6)),
			IF(? = 'FAILED', UTC_TIMESTAMP(6), NULL), ?, ?)`, eventType, status, -waitedMin, status, []byte(key), seq)
		id, err := res.LastInsertId()
		if err != nil {
			t.Fatal(err)
		}
		if seq == 1 {
			head = id
		}
		d.MustExec(t, `INSERT INTO outbox_ordering_queue (ordering_key, seq, message_id) VALUES (?, ?, ?)`, []byte(key), seq, id)
	}
	return head
}

// The shapes of a broken ordering key that BrokenKey writes: rows the runtime never leaves
// behind, but a hand-run DELETE or UPDATE can.
const (
	// BrokenHeadMissing: the key's head queue entry names a message that was deleted.
	BrokenHeadMissing = "missing"
	// BrokenHeadSent: the key's head message is SENT but its queue entry was left behind.
	BrokenHeadSent = "sent"
	// BrokenNotQueued: an ordered PENDING message whose queue entry was deleted.
	BrokenNotQueued = "not_queued"
)

// BrokenKey writes an ordering key broken in one of the BrokenXxx shapes, its rows enqueued
// agoMin minutes ago; key is stored as bytes, so it may be any. For BrokenHeadMissing and
// BrokenHeadSent the key has a head (seq 1) and a PENDING message of eventType behind it
// (seq 2), both queued, and then the head's message is deleted or marked SENT: the key stalls.
// For BrokenNotQueued it is one PENDING message of eventType at seq 1 with no queue entry. It
// returns the broken message's id (the head's, or the unqueued message's).
func (d *DB) BrokenKey(t testing.TB, key, eventType, shape string, agoMin int) (id int64) {
	t.Helper()
	insert := func(seq int) int64 {
		res := d.MustExec(t, `INSERT INTO outbox_messages (event_type, payload, status, attempts, max_attempts,
			next_attempt_at, created_at, ordering_key, ordering_seq)
			VALUES (?, '{}', 'PENDING', 0, 10, TIMESTAMPADD(MINUTE, ?, UTC_TIMESTAMP(6)), TIMESTAMPADD(MINUTE, ?, UTC_TIMESTAMP(6)), ?, ?)`,
			eventType, -agoMin, -agoMin, []byte(key), seq)
		id, err := res.LastInsertId()
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	switch shape {
	case BrokenNotQueued:
		d.MustExec(t, `INSERT INTO outbox_ordering (ordering_key, last_seq) VALUES (?, 1)`, []byte(key))
		return insert(1)
	case BrokenHeadMissing, BrokenHeadSent:
		d.MustExec(t, `INSERT INTO outbox_ordering (ordering_key, last_seq) VALUES (?, 2)`, []byte(key))
		for seq := 1; seq <= 2; seq++ {
			mid := insert(seq)
			d.MustExec(t, `INSERT INTO outbox_ordering_queue (ordering_key, seq, message_id) VALUES (?, ?, ?)`, []byte(key), seq, mid)
			if seq == 1 {
				id = mid
			}
		}
		if shape == BrokenHeadMissing {
			d.MustExec(t, `DELETE FROM outbox_messages WHERE id = ?`, id)
		} else {
			d.MustExec(t, `UPDATE outbox_messages SET status = 'SENT', sent_at = UTC_TIMESTAMP(6) WHERE id = ?`, id)
		}
		return id
	}
	t.Fatalf("testdb: BrokenKey: unknown shape %q", shape)
	return 0
}

// String is for log lines.
func (d *DB) String() string { return fmt.Sprintf("testdb(%s)", d.Name) }
