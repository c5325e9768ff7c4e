package outbox

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/outboxgen/outboxgen/internal/testdb"
	"github.com/outboxgen/outboxgen/queries"
)

// v5DB is a database with the tables as version 5's schema.sql created them.
func v5DB(t *testing.T) *testdb.DB {
	t.Helper()
	d := testdb.New(t)
	for _, stmt := range queries.Statements() {
		if v5, ok := v5DDL(t, stmt); ok {
			d.MustExec(t, v5)
		}
	}
	return d
}

// The upgrade from 5 to 6 is in place and can stop anywhere. The new column is added with
// ALGORITHM=INSTANT and the index online, on every server. A run killed after both is finished
// by Migrate, which passes over the column and the index that exist. Keys written by version 5
// keep their bytes and get no expiry, and the COMMENTs keep min 4.
func TestUpgradeV5ToV6InPlace(t *testing.T) {
	t.Parallel()
	d := v5DB(t)
	ctx := context.Background()
	for table, comment := range tableVersions(t, d) {
		if comment != "outboxgen schema 5 min 4" {
			t.Fatalf("fixture: table %s comment %q, want version 5 min 4", table, comment)
		}
	}
	d.MustExec(t, "INSERT INTO outbox_inbox (consumer, idem_key, processed_at) VALUES (?, ?, UTC_TIMESTAMP(6))", "mail", "k\xff1")

	ups, _ := queries.Upgrades()
	var v6 []string
	for _, u := range ups {
		if u.Version == 6 {
			v6 = u.Statements
		}
	}
	if len(v6) != 8 || !strings.Contains(v6[0], "ALGORITHM = INSTANT") || !strings.Contains(v6[1], "LOCK = NONE") {
		t.Fatalf("upgrade 6 = %q, want 8 statements, the column INSTANT and the index online", v6)
	}
	for _, stmt := range v6[:2] {
		if _, err := d.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("upgrade 6 statement %q: %v (want in place)", stmt, err)
		}
	}
	stmts, err := SchemaUpgrade(ctx, d.DB)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stmts {
		if strings.Contains(s, "expires_at") {
			t.Errorf("SchemaUpgrade after the column and index exist still has %q", s)
		}
	}
	if err := Migrate(ctx, d.DB); err != nil {
		t.Fatal(err)
	}
	for table, comment := range tableVersions(t, d) {
		if want := fmt.Sprintf("outboxgen schema %d min %d", SchemaVersion, currentMin); comment != want {
			t.Errorf("table %s comment %q after Migrate, want %q", table, comment, want)
		}
	}
	var key []byte
	var expires any
	if err := d.QueryRowContext(ctx, "SELECT idem_key, expires_at FROM outbox_inbox WHERE consumer = 'mail'").Scan(&key, &expires); err != nil {
		t.Fatal(err)
	}
	if string(key) != "k\xff1" || expires != nil {
		t.Errorf("version 5's key after the upgrade: %q, expires_at %v; want its bytes and NULL", key, expires)
	}
	var n int
	if err := d.QueryRowContext(ctx, "SELECT COUNT(*) FROM outbox_rate_limits").Scan(&n); err != nil {
		t.Errorf("outbox_rate_limits after the upgrade: %v", err)
	}
	if stmts, err := SchemaUpgrade(ctx, d.DB); err != nil || len(stmts) != 0 {
		t.Errorf("SchemaUpgrade after Migrate = %q, %v; want nothing to do", stmts, err)
	}
}

// An ADD KEY is passed over only when it is the statement's one change and the index exists.
func TestAddedKey(t *testing.T) {
	t.Parallel()
	for stmt, want := range map[string]string{
		"ALTER TABLE outbox_inbox\n    ADD KEY outbox_inbox_expires (expires_at),\n    ALGORITHM = INPLACE, LOCK = NONE": "outbox_inbox_expires",
		"ALTER TABLE t ADD INDEX `Ix` (a, b)":                             "ix",
		"ALTER TABLE t ADD KEY k (a), ADD COLUMN c INT":                   "",
		"ALTER TABLE t ADD COLUMN c INT, ALGORITHM = INSTANT":             "",
		"ALTER TABLE t ADD KEY k (a), DROP COLUMN b, ALGORITHM = INPLACE": "",
	} {
		if got := addedKey(stmt); got != want {
			t.Errorf("addedKey(%q) = %q, want %q", stmt, got, want)
		}
	}
}
