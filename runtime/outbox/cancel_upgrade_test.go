package outbox

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/outboxgen/outboxgen/internal/testdb"
	"github.com/outboxgen/outboxgen/queries"
)

// currentMin is the min version the current schema's COMMENTs name: version 5 added an ENUM
// value and a table that version 4 never uses, and version 6 a column and a table that versions
// 4 and 5 never use.
const currentMin = 4

// v5DDL turns a statement of today's schema.sql into version 5's, without what version 6 added.
// It reports false for the tables version 5 did not have.
func v5DDL(t *testing.T, stmt string) (string, bool) {
	t.Helper()
	if strings.Contains(stmt, "outbox_rate_limits") {
		return "", false
	}
	v5 := strings.ReplaceAll(stmt, "'outboxgen schema 6 min 4'", "'outboxgen schema 5 min 4'")
	if strings.Contains(stmt, "outbox_inbox") {
		v5 = strings.Replace(v5, "    expires_at   DATETIME(6)  NULL,\n", "", 1)
		v5 = strings.Replace(v5, ",\n    KEY outbox_inbox_expires (expires_at)", "", 1)
		if strings.Contains(v5, "expires") {
			t.Fatalf("schema.sql changed: cannot derive version 5's outbox_inbox from %q", stmt)
		}
	}
	if v5 == stmt {
		t.Fatalf("schema.sql changed: cannot derive version 5's DDL from %q", stmt[:60])
	}
	return v5, true
}

// v4DB is a database with the tables as version 4's schema.sql created them: today's DDL
// without what version 5 added.
func v4DB(t *testing.T) *testdb.DB {
	t.Helper()
	d := testdb.New(t)
	for _, stmt := range queries.Statements() {
		v5, ok := v5DDL(t, stmt)
		if !ok || strings.Contains(stmt, "outbox_pauses") {
			continue
		}
		v4 := strings.ReplaceAll(v5, "'outboxgen schema 5 min 4'", "'outboxgen schema 4'")
		v4 = strings.Replace(v4, ", 'CANCELLED')", ")", 1)
		v4 = strings.Replace(v4, "    cancelled_at    DATETIME(6)  NULL,\n", "", 1)
		if v4 == v5 {
			t.Fatalf("schema.sql changed: cannot derive version 4's DDL from %q", stmt[:60])
		}
		d.MustExec(t, v4)
	}
	return d
}

// v4Insert writes a PENDING row as version 4's Enqueue left it.
func v4Insert(t *testing.T, d *testdb.DB, eventType string) MessageID {
	t.Helper()
	res := d.MustExec(t, `INSERT INTO outbox_messages (event_type, payload, max_attempts, next_attempt_at, created_at)
		VALUES (?, '{}', 10, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))`, eventType)
	id, err := res.LastInsertId()
	if err != nil {
		t.Fatal(err)
	}
	return MessageID(id)
}

// The upgrade from 4 to 5 is in place: the ALTER of outbox_messages runs with ALGORITHM=INSTANT
// on every server, rows keep their status, and the COMMENTs keep min 4, so a worker of version
// 4 (whose check accepts a min of at most 4) keeps running beside version 5 and later.
func TestUpgradeV4ToV5InPlace(t *testing.T) {
	t.Parallel()
	d := v4DB(t)
	ctx := context.Background()
	for table, comment := range tableVersions(t, d) {
		if comment != "outboxgen schema 4" {
			t.Fatalf("fixture: table %s comment %q, want version 4", table, comment)
		}
	}
	pending := v4Insert(t, d, "a")
	failed := v4Insert(t, d, "a")
	d.MustExec(t, "UPDATE outbox_messages SET status = 'FAILED', failed_at = UTC_TIMESTAMP(6), attempts = 3 WHERE id = ?", failed)
	before := map[MessageID]row{pending: getRow(t, d, pending), failed: getRow(t, d, failed)}

	ups, _ := queries.Upgrades()
	var v5 []string
	for _, u := range ups {
		if u.Version == 5 {
			v5 = u.Statements
		}
	}
	if len(v5) != 7 || !strings.Contains(v5[0], "ALGORITHM = INSTANT") || !strings.Contains(v5[1], "ALGORITHM = INSTANT") {
		t.Fatalf("upgrade 5 = %q, want 7 statements, the first two INSTANT", v5)
	}
	// The two column changes run as they are, with ALGORITHM=INSTANT: none falls back to a
	// copying ALTER. Then the upgrade stops, as a killed one would, before the COMMENT.
	for _, stmt := range v5[:2] {
		if _, err := d.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("upgrade 5 statement %q: %v (want in place, metadata only)", stmt, err)
		}
	}
	// Migrate finishes it: the column that exists is not added again, and outbox_pauses is created.
	if err := Migrate(ctx, d.DB); err != nil {
		t.Fatal(err)
	}
	for id, b := range before {
		if a := getRow(t, d, id); a != b {
			t.Errorf("row %d after the upgrade: %+v, want %+v", id, a, b)
		}
	}
	var colType string
	if err := d.QueryRowContext(ctx, `SELECT COLUMN_TYPE FROM information_schema.COLUMNS
		WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'outbox_messages' AND COLUMN_NAME = 'status'`).Scan(&colType); err != nil {
		t.Fatal(err)
	}
	if want := "enum('PENDING','PROCESSING','SENT','FAILED','CANCELLED')"; colType != want {
		t.Errorf("status column %s, want %s", colType, want)
	}
	schemas, err := TableSchemas(ctx, d.DB)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range schemas {
		if !s.Exists || s.Version != SchemaVersion || s.Min != 4 {
			t.Errorf("table %s after the upgrade: %+v, want version %d min 4", s.Table, s, SchemaVersion)
		}
		// Version 4's check: a table is compatible when its min is at most 4.
		if s.Min > 4 {
			t.Errorf("table %s: a worker of version 4 would refuse it", s.Table)
		}
	}
	// Version 4's start-up probe still reads the table.
	var n int
	if err := d.QueryRowContext(ctx, "SELECT COUNT(*) FROM outbox_messages WHERE id = 0 AND headers IS NULL AND ordering_key IS NULL AND ordering_seq IS NULL").Scan(&n); err != nil {
		t.Errorf("version 4's probe on version 5: %v", err)
	}
	// The upgraded table cancels and delivers as a new one does.
	if n, err := Cancel(ctx, d.DB, Filter{IDs: []MessageID{pending}}); err != nil || n != 1 || statusOf(t, d, pending) != "CANCELLED" {
		t.Errorf("Cancel after the upgrade = %d, %v, status %s; want 1 CANCELLED", n, err, statusOf(t, d, pending))
	}
	if err := Migrate(ctx, d.DB); err != nil {
		t.Errorf("Migrate of a current database: %v", err)
	}
}

// A worker of this version refuses tables without outbox_pauses, saying to migrate.
func TestNewWorkerWantsThePauseTable(t *testing.T) {
	t.Parallel()
	d := migrated(t)
	d.MustExec(t, "DROP TABLE outbox_pauses")
	r := NewRouter()
	r.Handle("a", Policy{}, func(context.Context, json.RawMessage, Delivery) error { return nil })
	if _, err := NewWorker(d.DB, r, Config{}); err == nil || !strings.Contains(err.Error(), "migrate") {
		t.Errorf("NewWorker without outbox_pauses: %v, want an error saying to migrate", err)
	}
}
