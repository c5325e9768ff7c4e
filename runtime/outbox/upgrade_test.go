package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
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

// The upgrade from the first release's tables: rows in every status, one PROCESSING with a
// live lease, a worker running before, during and after it; nothing lost, nothing delivered
// twice, and the leased row's late result still lands (its claim token survived).
func TestMigrateUpgradesV1InPlace(t *testing.T) {
	t.Parallel()
	d := v1DB(t)
	ctx := context.Background()

	// A key of the inbox recorded under version 1; after the upgrade a key differing only in
	// case must be new.
	if first, err := Once(ctx, d, "billing", "invoice:in_1Ab"); err != nil || !first {
		t.Fatalf("Once on version 1: %v, %v", first, err)
	}

	release := make(chan struct{})
	calls := newCalls()
	r := NewRouter()
	r.Handle("ok", Policy{}, func(_ context.Context, p json.RawMessage, dl Delivery) error { calls.add(dl, p); return nil })
	r.Handle("bad", Policy{}, func(_ context.Context, p json.RawMessage, dl Delivery) error {
		calls.add(dl, p)
		return Permanent(errors.New("bounced"))
	})
	r.Handle("slow", Policy{}, func(_ context.Context, p json.RawMessage, dl Delivery) error {
		calls.add(dl, p)
		<-release
		return nil
	})
	stopA := start(t, newTestWorker(t, d.DB, r, fastConfig(Config{})))

	var sent, failed []MessageID
	for i := 0; i < 3; i++ {
		sent = append(sent, enqueueN(t, d.DB, "ok", 1)...)
	}
	failed = enqueueN(t, d.DB, "bad", 2)
	slow := enqueueN(t, d.DB, "slow", 1)[0]
	later := enqueueN(t, d.DB, "ok", 1, Delay(time.Hour))[0]
	waitFor(t, 10*time.Second, "version-1 rows SENT, FAILED and PROCESSING", func() bool {
		return countRows(t, d, "status='SENT'") == 3 && countRows(t, d, "status='FAILED'") == 2 &&
			countRows(t, d, "status='PROCESSING'") == 1
	})
	before := map[MessageID]row{}
	for _, id := range append(append([]MessageID{slow, later}, sent...), failed...) {
		before[id] = getRow(t, d, id)
	}
	if before[slow].Status != "PROCESSING" || !before[slow].ClaimToken.Valid {
		t.Fatalf("slow message before the upgrade: %+v, want PROCESSING with a claim token", before[slow])
	}

	// What a version-1 database still needs.
	stmts, err := SchemaUpgrade(ctx, d.DB)
	if err != nil || len(stmts) != 3 {
		t.Fatalf("SchemaUpgrade on version 1 = %d statements, %v; want the 3 ALTER TABLEs", len(stmts), err)
	}
	for _, s := range stmts {
		if !strings.HasPrefix(s, "ALTER TABLE ") {
			t.Errorf("upgrade statement %q, want ALTER TABLE", s)
		}
	}

	// Two processes migrate at once while the worker runs: both succeed, one waits.
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
		if comment != "outboxgen schema 2" {
			t.Errorf("table %s comment %q after Migrate, want %q", table, comment, "outboxgen schema 2")
		}
	}
	if stmts, err := SchemaUpgrade(ctx, d.DB); err != nil || len(stmts) != 0 {
		t.Errorf("SchemaUpgrade after Migrate = %q, %v; want nothing to do", stmts, err)
	}
	if err := Migrate(ctx, d.DB); err != nil {
		t.Errorf("Migrate a second time: %v", err)
	}

	// Every row as it was, byte for byte (on MySQL, version 1's JSON column had already
	// rewritten payloads: the upgrade keeps what was stored).
	for id, b := range before {
		a := getRow(t, d, id)
		if a.Status != b.Status || a.Attempts != b.Attempts || a.Payload != b.Payload || a.Key != b.Key ||
			a.EventType != b.EventType || a.ClaimToken != b.ClaimToken || !a.NextAttemptAt.Equal(b.NextAttemptAt) {
			t.Errorf("message %d changed by the upgrade:\n before %+v\n after  %+v", id, b, a)
		}
	}

	// The leased row's handler finishes after the upgrade: its fenced result lands.
	close(release)
	waitFor(t, 10*time.Second, "the leased message SENT after the upgrade", func() bool { return statusOf(t, d, slow) == "SENT" })
	// The worker that ran through the upgrade still delivers new messages.
	after := enqueueN(t, d.DB, "ok", 2)
	waitFor(t, 10*time.Second, "messages enqueued after the upgrade SENT", func() bool {
		return countRows(t, d, "status='SENT'") == 3+1+2
	})
	stopA()
	// So does a worker started after it.
	stopB := start(t, newTestWorker(t, d.Open(t), r, fastConfig(Config{})))
	more := enqueueN(t, d.DB, "ok", 2)
	waitFor(t, 10*time.Second, "messages for the new worker SENT", func() bool { return countRows(t, d, "status='SENT'") == 8 })
	stopB()

	for _, id := range append(append(append(sent, slow), after...), more...) {
		if n := calls.of(id); n != 1 {
			t.Errorf("message %d handled %d times, want 1", id, n)
		}
	}
	for _, id := range failed {
		if n := calls.of(id); n != 1 || statusOf(t, d, id) != "FAILED" {
			t.Errorf("failed message %d: handled %d times, status %s; want 1, FAILED", id, n, statusOf(t, d, id))
		}
	}
	if s := statusOf(t, d, later); s != "PENDING" || calls.of(later) != 0 {
		t.Errorf("delayed message: %s, handled %d times; want PENDING, 0", s, calls.of(later))
	}
	if first, err := Once(ctx, d, "billing", "invoice:in_1aB"); err != nil || !first {
		t.Errorf("Once(in_1aB) after the upgrade with in_1Ab recorded: %v, %v; want true", first, err)
	}
	if first, err := Once(ctx, d, "billing", "invoice:in_1Ab"); err != nil || first {
		t.Errorf("Once(in_1Ab) recorded under version 1, after the upgrade: %v, %v; want false", first, err)
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
	if err == nil || !strings.Contains(err.Error(), "table outbox_messages is at schema version 99, newer than this outboxgen's 2") {
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
