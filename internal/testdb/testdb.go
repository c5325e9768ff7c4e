// Package testdb is runtime/outboxtest/testdb (a fresh database per test on the server of
// OUTBOX_TEST_DSN) plus what only this module's own tests need: a pool through the
// fault-injecting driver, a server user of limited rights, the server's sessions. Its DB has
// the public one's fields and methods, so a test of this module imports only this package.
package testdb

import (
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/outboxgen/outboxgen/internal/faultdriver"
	"github.com/outboxgen/outboxgen/runtime/outboxtest/testdb"
)

// EnvDSN names the environment variable holding the server-level DSN.
const EnvDSN = testdb.EnvDSN

// The shapes of a broken ordering key that BrokenKey writes (see the public package).
const (
	BrokenHeadMissing = testdb.BrokenHeadMissing
	BrokenHeadSent    = testdb.BrokenHeadSent
	BrokenNotQueued   = testdb.BrokenNotQueued
)

// DB is one test's database: the public testdb.DB's fields, its methods, and this module's.
type DB testdb.DB

func (d *DB) pub() *testdb.DB { return (*testdb.DB)(d) }

// ServerDSN returns OUTBOX_TEST_DSN, or skips the test with a message saying how to get one.
func ServerDSN(t testing.TB) string { t.Helper(); return testdb.ServerDSN(t) }

// New creates an empty database for t, dropped when t ends.
func New(t testing.TB) *DB { t.Helper(); return (*DB)(testdb.New(t)) }

// Migrated is New plus the outboxgen schema.
func Migrated(t testing.TB) *DB { t.Helper(); return (*DB)(testdb.Migrated(t)) }

// Open opens another pool on d's database.
func (d *DB) Open(t testing.TB) *sql.DB { t.Helper(); return d.pub().Open(t) }

// MustExec runs a statement or fails the test.
func (d *DB) MustExec(t testing.TB, query string, args ...any) sql.Result {
	t.Helper()
	return d.pub().MustExec(t, query, args...)
}

// Pending writes a PENDING row of eventType, stored as bytes.
func (d *DB) Pending(t testing.TB, eventType string) { t.Helper(); d.pub().Pending(t, eventType) }

// HeldKey writes an ordering key held by a FAILED head and returns the head's id.
func (d *DB) HeldKey(t testing.TB, key, eventType string, waitedMin int) int64 {
	t.Helper()
	return d.pub().HeldKey(t, key, eventType, waitedMin)
}

// BrokenKey writes an ordering key broken in one of the BrokenXxx shapes and returns the
// broken message's id.
func (d *DB) BrokenKey(t testing.TB, key, eventType, shape string, agoMin int) int64 {
	t.Helper()
	return d.pub().BrokenKey(t, key, eventType, shape, agoMin)
}

// String is for log lines.
func (d *DB) String() string { return d.pub().String() }

// OpenFaulty opens another pool on d's database through a fresh fault-injecting driver,
// closed when the test ends.
func (d *DB) OpenFaulty(t testing.TB) (*faultdriver.Injector, *sql.DB) {
	t.Helper()
	inj := faultdriver.New()
	db, err := inj.OpenDB(d.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return inj, db
}

// User creates a server user with password pw and privileges (e.g. "SELECT, INSERT" or "ALL")
// on d's database, dropped when the test ends, and returns a DSN for d's database as that user.
func (d *DB) User(t testing.TB, pw, privileges string) string {
	t.Helper()
	var rnd [6]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		t.Fatal(err)
	}
	user := "u_" + hex.EncodeToString(rnd[:])
	d.MustExec(t, "CREATE USER '"+user+"'@'%' IDENTIFIED BY '"+strings.ReplaceAll(pw, "'", "''")+"'")
	// Registered after New's cleanup, so it runs first, while d.DB is still open.
	t.Cleanup(func() {
		if _, err := d.Exec("DROP USER IF EXISTS '" + user + "'@'%'"); err != nil {
			t.Errorf("testdb: drop user %s: %v", user, err)
		}
	})
	d.MustExec(t, "GRANT "+privileges+" ON `"+d.Name+"`.* TO '"+user+"'@'%'")
	cfg, err := mysql.ParseDSN(d.DSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg.User, cfg.Passwd = user, pw
	return cfg.FormatDSN()
}
