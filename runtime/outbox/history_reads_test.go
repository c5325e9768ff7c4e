package outbox

import (
	"context"
	"database/sql"
	"strconv"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/internal/testdb"
)

// What the worker's periodic passes read does not grow with the SENT history kept in the
// table. The same passes run on two databases with the same live rows, one of them beside
// 20,000 SENT rows: the reclaim, the broken-key repair, the stuck watch, retention with
// everything kept, Stats and OldestSent. The server's session counters of rows read must
// differ by less than a tenth of the history. The 2,000 PENDING rows make the live part a
// tenth of the table. With a part that large, a plan that reads the table in id order until
// its LIMIT is met looks cheap to the optimizer, and it reads the whole history when nothing
// matches.
func TestWorkerReadsDoNotGrowWithHistory(t *testing.T) {
	t.Parallel()
	const history, waiting = 20_000, 2_000
	withHistory, without := migrated(t), migrated(t)
	// Two days old, a cross join of four tables of ten digits and one of two rows.
	digits := "(SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)"
	withHistory.MustExec(t, `INSERT INTO outbox_messages (event_type, payload, status, attempts, max_attempts, next_attempt_at, created_at, sent_at)
		SELECT 'hist_r', '{}', 'SENT', 1, 10, t, t, t
		FROM (SELECT TIMESTAMPADD(DAY, -2, UTC_TIMESTAMP(6)) AS t) c, `+digits+` a, `+digits+` b, `+digits+` e, `+digits+` f, (SELECT 0 AS d UNION ALL SELECT 1) g`)
	if n := countRows(t, withHistory, "status = 'SENT'"); n != history {
		t.Fatalf("history: %d SENT rows, want %d", n, history)
	}
	reads := func(d *testdb.DB) int64 {
		enqueueN(t, d.DB, "hist_r", waiting)
		d.MustExec(t, "ANALYZE TABLE outbox_messages")
		pool := d.Open(t)
		pool.SetMaxOpenConns(1)
		pool.SetMaxIdleConns(1)
		w := newTestWorker(t, pool, retentionRouter(t, "hist_r"), Config{Retention: Retention{Sent: KeepForever}})
		conn := connectionID(t, pool)
		r0 := rowsRead(t, pool)
		overhead := rowsRead(t, pool) - r0 // what reading the counters reads
		ctx := context.Background()
		if _, err := w.reclaimOnce(ctx); err != nil {
			t.Fatalf("reclaim: %v", err)
		}
		if _, err := repairBrokenKeys(ctx, pool, time.Minute, w.log); err != nil {
			t.Fatalf("repair: %v", err)
		}
		if _, err := w.watchOnce(ctx); err != nil {
			t.Fatalf("watch: %v", err)
		}
		if _, err := w.retainOnce(ctx, w.cfg.Retention.withDefaults()); err != nil {
			t.Fatalf("retention: %v", err)
		}
		if _, err := Stats(ctx, pool); err != nil {
			t.Fatalf("Stats: %v", err)
		}
		if _, _, err := OldestSent(ctx, pool); err != nil {
			t.Fatalf("OldestSent: %v", err)
		}
		read := rowsRead(t, pool) - overhead - r0 - overhead
		if id := connectionID(t, pool); id != conn {
			t.Fatalf("the pool's connection changed (%d, then %d): its session counters started over", conn, id)
		}
		return read
	}
	with, base := reads(withHistory), reads(without)
	t.Logf("rows read by one pass of each beside %d PENDING rows: %d, and %d with %d SENT rows kept", waiting, base, with, history)
	if with-base > history/10 {
		t.Errorf("the passes read %d rows more beside %d SENT rows kept: a query walks the history", with-base, history)
	}
}

// rowsRead is the session's rows read by any access path (the Handler_read_* counters).
func rowsRead(t *testing.T, db *sql.DB) int64 {
	t.Helper()
	rows, err := db.Query("SHOW SESSION STATUS LIKE 'Handler_read%'")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var total int64
	for rows.Next() {
		var name, v string
		if err := rows.Scan(&name, &v); err != nil {
			t.Fatal(err)
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("%s = %q: %v", name, v, err)
		}
		total += n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return total
}

// connectionID is the server's id of the session a query on db gets.
func connectionID(t *testing.T, db *sql.DB) int64 {
	t.Helper()
	var id int64
	if err := db.QueryRow("SELECT CONNECTION_ID()").Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}
