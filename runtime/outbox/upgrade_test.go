package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
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

// v1Insert writes a row as the first release's Enqueue did (its MessageInsert), and v1Set moves
// it to a status as its worker did: the state a version-1 fleet leaves behind.
func v1Insert(t *testing.T, d *testdb.DB, eventType, payload, key string, delay time.Duration) MessageID {
	t.Helper()
	res := d.MustExec(t, `INSERT INTO outbox_messages (event_type, payload, idempotency_key, status, attempts, max_attempts, next_attempt_at, created_at)
		VALUES (?, ?, ?, 'PENDING', 0, 10, TIMESTAMPADD(MICROSECOND, ?, UTC_TIMESTAMP(6)), UTC_TIMESTAMP(6))`,
		eventType, payload, key, delay.Microseconds())
	id, err := res.LastInsertId()
	if err != nil {
		t.Fatal(err)
	}
	return MessageID(id)
}

// The upgrade from the first release's tables, with rows in every status, one PROCESSING under a
// live lease of a (version-1) worker: nothing lost, nothing changed, nothing delivered twice; the
// leased row's late fenced result still lands after the upgrade (its claim token survived), and a
// worker of this version delivers what is due.
func TestMigrateUpgradesV1InPlace(t *testing.T) {
	t.Parallel()
	d := v1DB(t)
	ctx := context.Background()

	// A key of the inbox recorded under version 1; after the upgrade a key differing only in
	// case must be new.
	d.MustExec(t, "INSERT INTO outbox_inbox (consumer, idem_key, processed_at) VALUES ('billing', 'invoice:in_1Ab', UTC_TIMESTAMP(6))")

	due := []MessageID{
		v1Insert(t, d, "ok", `{"n":1}`, "k:1", 0),
		v1Insert(t, d, "ok", `{"n": 2, "s":"é"}`, "", 0),
	}
	later := v1Insert(t, d, "ok", `{"n":3}`, "k:3", time.Hour)
	sent := v1Insert(t, d, "ok", `{"n":4}`, "k:4", 0)
	d.MustExec(t, "UPDATE outbox_messages SET status='SENT', attempts=1, claim_token='t-sent', claimed_at=UTC_TIMESTAMP(6), sent_at=UTC_TIMESTAMP(6) WHERE id=?", int64(sent))
	failed := v1Insert(t, d, "ok", `{"n":5}`, "k:5", 0)
	d.MustExec(t, "UPDATE outbox_messages SET status='FAILED', attempts=10, last_error='attempt 10 of 10: bounced', failed_at=UTC_TIMESTAMP(6) WHERE id=?", int64(failed))
	leased := v1Insert(t, d, "ok", `{"n":6}`, "k:6", 0)
	d.MustExec(t, `UPDATE outbox_messages SET status='PROCESSING', attempts=1, claim_token='0123456789abcdef0123456789abcdef',
		claimed_at=UTC_TIMESTAMP(6), reclaim_after=UTC_TIMESTAMP(6) + INTERVAL 5 MINUTE WHERE id=?`, int64(leased))
	all := append([]MessageID{later, sent, failed, leased}, due...)
	before := map[MessageID]row{}
	for _, id := range all {
		before[id] = getRow(t, d, id)
	}

	// What a version-1 database still needs.
	stmts, err := SchemaUpgrade(ctx, d.DB)
	// Versions 2, 3 and 4 alter the three tables; version 4 also creates the two ordering tables.
	if err != nil || len(stmts) != 11 {
		t.Fatalf("SchemaUpgrade on version 1 = %d statements, %v; want 9 ALTER TABLEs and 2 CREATE TABLEs", len(stmts), err)
	}
	for _, s := range stmts {
		if !strings.HasPrefix(s, "ALTER TABLE ") && !strings.HasPrefix(s, "CREATE TABLE IF NOT EXISTS outbox_ordering") {
			t.Errorf("upgrade statement %q, want ALTER TABLE or the ordering tables' CREATE", s)
		}
	}
	// This version's worker refuses the old tables, saying what to do.
	r := NewRouter()
	calls := newCalls()
	r.Handle("ok", Policy{}, func(_ context.Context, p json.RawMessage, dl Delivery) error { calls.add(dl, p); return nil })
	if _, err := NewWorker(d.DB, r, Config{}); err == nil || !strings.Contains(err.Error(), "run outboxgen migrate") {
		t.Fatalf("NewWorker on version-1 tables: %v, want the migrate hint", err)
	}

	// Two processes migrate at once: both succeed, one waits for the other.
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		pool := d.Open(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = Migrate(ctx, pool)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("concurrent Migrate %d: %v", i, err)
		}
	}
	for table, comment := range tableVersions(t, d) {
		if want := fmt.Sprintf("outboxgen schema %d", SchemaVersion); comment != want {
			t.Errorf("table %s comment %q after Migrate, want %q", table, comment, want)
		}
	}
	if stmts, err := SchemaUpgrade(ctx, d.DB); err != nil || len(stmts) != 0 {
		t.Errorf("SchemaUpgrade after Migrate = %q, %v; want nothing to do", stmts, err)
	}
	if err := Migrate(ctx, d.DB); err != nil {
		t.Errorf("Migrate a second time: %v", err)
	}

	// Every row as it was, byte for byte.
	for id, b := range before {
		a := getRow(t, d, id)
		if a.Status != b.Status || a.Attempts != b.Attempts || a.Payload != b.Payload || a.Key != b.Key ||
			a.EventType != b.EventType || a.ClaimToken != b.ClaimToken || a.LastError != b.LastError ||
			!a.NextAttemptAt.Equal(b.NextAttemptAt) || !a.ReclaimAfter.Time.Equal(b.ReclaimAfter.Time) {
			t.Errorf("message %d changed by the upgrade:\n before %+v\n after  %+v", id, b, a)
		}
	}

	// A worker of this version delivers what is due, leaves the leased row to its lease and the
	// delayed one to its time.
	stop := start(t, newTestWorker(t, d.DB, r, fastConfig(Config{})))
	waitFor(t, 10*time.Second, "the due version-1 messages SENT", func() bool {
		return statusOf(t, d, due[0]) == "SENT" && statusOf(t, d, due[1]) == "SENT"
	})
	after := enqueueN(t, d.DB, "ok", 2)
	waitFor(t, 10*time.Second, "new messages SENT", func() bool {
		return statusOf(t, d, after[0]) == "SENT" && statusOf(t, d, after[1]) == "SENT"
	})
	stop()
	// The version-1 worker that held the lease writes its result, fenced on its token.
	res := d.MustExec(t, `UPDATE outbox_messages SET status='SENT', sent_at=UTC_TIMESTAMP(6)
		WHERE id=? AND status='PROCESSING' AND claim_token='0123456789abcdef0123456789abcdef'`, int64(leased))
	if n, _ := res.RowsAffected(); n != 1 {
		t.Errorf("the leased row's fenced result after the upgrade changed %d rows, want 1", n)
	}
	for _, id := range append(due, after...) {
		if n := calls.of(id); n != 1 {
			t.Errorf("message %d handled %d times, want 1", id, n)
		}
	}
	for _, id := range []MessageID{later, sent, failed, leased} {
		if n := calls.of(id); n != 0 {
			t.Errorf("message %d (delayed, SENT, FAILED or leased before the upgrade) handled %d times, want 0", id, n)
		}
	}
	if s := statusOf(t, d, later); s != "PENDING" {
		t.Errorf("delayed message: %s, want PENDING", s)
	}
	if got := calls.payloads[due[1]]; got != before[due[1]].Payload {
		t.Errorf("payload delivered after the upgrade: %q, want the stored %q", got, before[due[1]].Payload)
	}
	if first, err := Once(ctx, d, "billing", "invoice:in_1aB"); err != nil || !first {
		t.Errorf("Once(in_1aB) after the upgrade with in_1Ab recorded: %v, %v; want true", first, err)
	}
	if first, err := Once(ctx, d, "billing", "invoice:in_1Ab"); err != nil || first {
		t.Errorf("Once(in_1Ab) recorded under version 1, after the upgrade: %v, %v; want false", first, err)
	}
}

// From version 2 (this round's first schema) on, the later versions add columns online (an
// instant ALTER where the server has it) and the ordering tables; rows untouched.
func TestMigrateUpgradesV2AddsHeaders(t *testing.T) {
	t.Parallel()
	d := v1DB(t)
	ups, err := queries.Upgrades()
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range ups {
		if u.Version == 2 {
			for _, stmt := range u.Statements {
				d.MustExec(t, stmt)
			}
		}
	}
	id := v1Insert(t, d, "ok", `{"a":1}`, "k", 0)
	if err := Migrate(context.Background(), d.DB); err != nil {
		t.Fatal(err)
	}
	if rec, err := Inspect(context.Background(), d, id); err != nil || string(rec.Payload) != `{"a":1}` || rec.Headers != nil {
		t.Errorf("version-2 row after the upgrade to 3: %+v, %v", rec, err)
	}
	for table, comment := range tableVersions(t, d) {
		if want := fmt.Sprintf("outboxgen schema %d", SchemaVersion); comment != want {
			t.Errorf("table %s comment %q, want %q", table, comment, want)
		}
	}
}

// Migrate names each column whose type or collation is wrong in a table that claims to be
// current, rather than letting keys compare case-blind.
func TestMigrateChecksTypesAndCollations(t *testing.T) {
	t.Parallel()
	d := testdb.Migrated(t)
	d.MustExec(t, "ALTER TABLE outbox_inbox MODIFY idem_key VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL")
	d.MustExec(t, "ALTER TABLE outbox_messages MODIFY payload LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL")
	err := Migrate(context.Background(), d.DB)
	for _, want := range []string{
		"column outbox_inbox.idem_key is varchar(191) collate utf8mb4_general_ci, want varbinary(764)",
		"column outbox_messages.payload has collation utf8mb4_general_ci, want utf8mb4_bin",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Migrate over altered columns: err = %v\nwant it to contain %q", err, want)
		}
	}
	if err != nil && strings.Contains(err.Error(), "\n") {
		t.Errorf("Migrate's error spans lines: %q", err)
	}
}

// A table from a newer outboxgen is not downgraded or touched.
func TestMigrateRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	d := testdb.Migrated(t)
	d.MustExec(t, "ALTER TABLE outbox_messages COMMENT = 'outboxgen schema 99'")
	err := Migrate(context.Background(), d.DB)
	if err == nil || !strings.Contains(err.Error(), "table outbox_messages is at schema version 99, newer than this outboxgen's 4") {
		t.Errorf("Migrate over a newer table: err = %v", err)
	}
}

// A server that logs statements rejects the worker's READ COMMITTED writes (error 1665):
// Migrate and NewWorker say so at start. Where the binary log is off (MariaDB's default), the
// setting is harmless and both go on.
func TestStatementBinlogIsRefusedAtStart(t *testing.T) {
	t.Parallel()
	d := testdb.Migrated(t)
	var logBin int
	if err := d.QueryRow("SELECT @@log_bin").Scan(&logBin); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("mysql", d.DSN+"&binlog_format=%27STATEMENT%27")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	merr := Migrate(context.Background(), db)
	r := NewRouter()
	r.Handle("e", Policy{}, func(context.Context, json.RawMessage, Delivery) error { return nil })
	_, werr := NewWorker(db, r, Config{})
	if logBin == 1 {
		for name, err := range map[string]error{"Migrate": merr, "NewWorker": werr} {
			if err == nil || !strings.Contains(err.Error(), "binlog_format=STATEMENT") {
				t.Errorf("%s with log_bin=ON and binlog_format=STATEMENT: err = %v, want it to name binlog_format=STATEMENT", name, err)
			}
		}
		// And the refusal is right: a READ COMMITTED write does fail there.
		tx, err := db.BeginTx(context.Background(), &sql.TxOptions{Isolation: sql.LevelReadCommitted})
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if _, err := tx.Exec("UPDATE outbox_messages SET attempts = 0 WHERE id = 0"); err == nil || !strings.Contains(err.Error(), "1665") {
			t.Errorf("READ COMMITTED write under binlog_format=STATEMENT: %v, want error 1665", err)
		}
		return
	}
	if merr != nil || werr != nil {
		t.Errorf("log_bin=OFF, binlog_format=STATEMENT: Migrate %v, NewWorker %v; want both nil", merr, werr)
	}
}
