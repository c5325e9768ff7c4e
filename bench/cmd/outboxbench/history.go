// The history workload: the W2 drain and its claim timings with a long SENT history kept in the
// table, against an empty table; then with rows just claimed and sent before the drain (their
// old claim index entries delete-marked), without and with another connection holding a
// REPEATABLE READ snapshot open, which keeps InnoDB's purge from removing those entries.

package main

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// historyCase is one row group of the history workload.
type historyCase int

const (
	histEmpty    historyCase = iota // no history
	histKept                        // HistoryRows SENT rows kept
	histMarked                      // and DrainN rows sent just before the drain
	histSnapshot                    // the same, with a snapshot held from before they were sent to the end of the drain
)

func historyLabel(sz sizes, c historyCase) string {
	base := fmt.Sprintf("History: W2 drain %d, no-op, 1 worker", sz.DrainN)
	switch c {
	case histEmpty:
		return base + ", empty table"
	case histKept:
		return fmt.Sprintf("%s, %d SENT rows kept", base, sz.Ret.HistoryRows)
	case histMarked:
		return fmt.Sprintf("%s, %d SENT rows kept, %d more sent just before", base, sz.Ret.HistoryRows, sz.DrainN)
	}
	return fmt.Sprintf("%s, %d SENT rows kept, %d more sent just before, REPEATABLE READ snapshot held", base, sz.Ret.HistoryRows, sz.DrainN)
}

// runHistory runs the four cases. The first has a database of its own; the other three share
// one, filled once, in that order (each adds its drain's rows to the history, a small share
// of it at full size). Every worker keeps its SENT rows (Retention.Sent KeepForever).
func (e runEnv) runHistory(ctx context.Context, rec recordFunc) {
	keep := outbox.Config{Retention: outbox.Retention{Sent: outbox.KeepForever}}
	record := func(c historyCase, dr drainResult, err error, took time.Duration, note string) {
		label := historyLabel(e.sz, c)
		rec(label, result{Unit: "msg/s", Value: dr.rate, Loss: dr.loss, Dup: dr.dup, Note: note}, err, took)
		if err != nil {
			return
		}
		rec(label+", claim p50", result{Unit: "ms", Value: dr.p50}, nil, 0)
		rec(label+", claim p99", result{Unit: "ms", Value: dr.p99, Note: fmt.Sprintf("%d claims that found rows", dr.claims)}, nil, 0)
		rec(label+", pages read from disk", result{Unit: "pages", Value: float64(dr.reads), Note: "Innodb_buffer_pool_reads over the drain, server-wide"}, nil, 0)
	}
	t := time.Now()
	var dr drainResult
	err := e.withDB(ctx, "hist", oursSystem{}, func(dbName string, db *sql.DB) error {
		var err error
		dr, err = e.drainFrom(ctx, dbName, db, e.sz.DrainN, keep, nil)
		return err
	})
	record(histEmpty, dr, err, time.Since(t), "")
	if ctx.Err() != nil {
		return
	}

	// The other three cases share a database; a case that fails ends the sequence, whose later
	// cases would start from an unknown table.
	var failed bool
	err = e.withDB(ctx, "hist", oursSystem{}, func(dbName string, db *sql.DB) error {
		t := time.Now()
		if _, err := fillRows(ctx, db, e.sz.Ret.HistoryRows, "SENT", backlogAge); err != nil {
			return err
		}
		fill := time.Since(t)
		logf("  history: filled %d SENT rows in %.1fs (%.0f rows/s)", e.sz.Ret.HistoryRows, fill.Seconds(), float64(e.sz.Ret.HistoryRows)/fill.Seconds())
		size := historySize(ctx, db)
		settled := settleServer(ctx, db, 10*time.Minute)
		logf("  history: %s", settled)
		t = time.Now()
		dr, err := e.drainFrom(ctx, dbName, db, e.sz.DrainN, keep, nil)
		record(histKept, dr, err, time.Since(t), fmt.Sprintf("the %d SENT rows took %.1fs to write (multi-row INSERT, then INSERT ... SELECT doubling); then the server %s; %s", e.sz.Ret.HistoryRows, fill.Seconds(), settled, size))
		if err != nil {
			failed = true
			return nil
		}

		t = time.Now()
		if err := sendBefore(ctx, db, e.sz.DrainN); err != nil {
			return err
		}
		dr, err = e.drainFrom(ctx, dbName, db, e.sz.DrainN, keep, nil)
		record(histMarked, dr, err, time.Since(t), "")
		if err != nil {
			failed = true
			return nil
		}

		t = time.Now()
		var note string
		dr, err = e.drainUnderSnapshot(ctx, dbName, db, keep, &note)
		record(histSnapshot, dr, err, time.Since(t), note)
		return nil
	})
	if err != nil && !failed {
		// The shared database could not be set up: every case of it fails with this error.
		for _, c := range []historyCase{histKept, histMarked, histSnapshot} {
			record(c, drainResult{}, err, 0, "")
		}
	}
}

// sendBefore writes n PENDING rows due an hour ago and marks them SENT by id range, as a drain
// just before would: each row's claim index entry moves from the PENDING range to the SENT one,
// and the old entry stays delete-marked, ahead of the next backlog in the claim's scan, until
// InnoDB's purge removes it.
func sendBefore(ctx context.Context, db *sql.DB, n int) error {
	first, err := fillRows(ctx, db, n, "PENDING", time.Hour)
	if err != nil {
		return err
	}
	last, err := maxID(ctx, db)
	if err != nil {
		return err
	}
	const chunk = 10_000
	for from := first; from <= last; from += chunk {
		_, err := db.ExecContext(ctx, `UPDATE outbox_messages SET status = 'SENT', attempts = 1, sent_at = UTC_TIMESTAMP(6)
			WHERE id BETWEEN ? AND ? AND status = 'PENDING'`, from, min(from+chunk-1, last))
		if err != nil {
			return fmt.Errorf("mark sent: %w", err)
		}
	}
	return nil
}

// drainUnderSnapshot opens a REPEATABLE READ snapshot on a connection of its own (START
// TRANSACTION WITH CONSISTENT SNAPSHOT and one SELECT, what a long report or a forgotten
// transaction looks like), then sends DrainN rows as sendBefore does and drains a backlog,
// holding the snapshot to the end. note gets what an operator sees: the snapshot's age and
// isolation in information_schema.INNODB_TRX and the history list length of SHOW ENGINE INNODB
// STATUS, before the rows were sent, before the drain, after it, and after the snapshot ended.
func (e runEnv) drainUnderSnapshot(ctx context.Context, dbName string, db *sql.DB, cfg outbox.Config, note *string) (drainResult, error) {
	var dr drainResult
	conn, err := db.Conn(ctx)
	if err != nil {
		return dr, err
	}
	defer conn.Close()
	var connID int64
	if err := conn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&connID); err != nil {
		return dr, err
	}
	for _, q := range []string{"SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ", "START TRANSACTION WITH CONSISTENT SNAPSHOT"} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return dr, fmt.Errorf("%s: %w", q, err)
		}
	}
	ended := false
	end := func() error {
		if ended {
			return nil
		}
		ended = true
		_, err := conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
		return err
	}
	defer func() { _ = end() }()
	var rows int64
	if err := conn.QueryRowContext(ctx, "SELECT COUNT(*) FROM outbox_messages WHERE id <= 1").Scan(&rows); err != nil {
		return dr, err
	}
	seen := []string{"history list length " + historyLength(ctx, db) + " as the snapshot opened"}
	if err := sendBefore(ctx, db, e.sz.DrainN); err != nil {
		return dr, err
	}
	seen = append(seen, "before the drain: "+snapshotSeen(ctx, db, connID))
	dr, err = e.drainFrom(ctx, dbName, db, e.sz.DrainN, cfg, func() func() {
		return func() { seen = append(seen, "after the drain: "+snapshotSeen(ctx, db, connID)) }
	})
	if eerr := end(); eerr != nil && err == nil {
		err = fmt.Errorf("end snapshot: %w", eerr)
	}
	seen = append(seen, "as the snapshot ended: history list length "+historyLength(ctx, db)+" (purge then catches up in the background)")
	*note = "operator's view (server-wide figures: other sessions on the server count too): " + strings.Join(seen, "; ")
	return dr, err
}

// snapshotSeen is what an operator's queries show of the snapshot connection connID.
func snapshotSeen(ctx context.Context, db *sql.DB, connID int64) string {
	var age int64
	var iso string
	err := db.QueryRowContext(ctx, `SELECT TIMESTAMPDIFF(SECOND, trx_started, NOW()), trx_isolation_level
		FROM information_schema.INNODB_TRX WHERE trx_mysql_thread_id = ?`, connID).Scan(&age, &iso)
	trx := fmt.Sprintf("INNODB_TRX: thread %d, %s, open %d s", connID, iso, age)
	if err != nil {
		trx = "INNODB_TRX: " + err.Error()
	}
	return trx + ", history list length " + historyLength(ctx, db)
}

var historyLenRE = regexp.MustCompile(`History list length (\d+)`)

// historyLength is "History list length" from SHOW ENGINE INNODB STATUS (undo log records not
// yet purged, server-wide), or why it is unknown.
func historyLength(ctx context.Context, db *sql.DB) string {
	var typ, name, st string
	if err := db.QueryRowContext(ctx, "SHOW ENGINE INNODB STATUS").Scan(&typ, &name, &st); err != nil {
		return "unknown (" + err.Error() + ")"
	}
	m := historyLenRE.FindStringSubmatch(st)
	if m == nil {
		return "unknown (not in SHOW ENGINE INNODB STATUS)"
	}
	if _, err := strconv.ParseInt(m[1], 10, 64); err != nil {
		return "unknown"
	}
	return m[1]
}

// historySize is the table's data and index size as information_schema.TABLES has it after
// ANALYZE TABLE (sampled pages, no count of the rows).
func historySize(ctx context.Context, db *sql.DB) string {
	if _, err := db.ExecContext(ctx, "ANALYZE TABLE outbox_messages"); err != nil {
		return "size unknown: " + err.Error()
	}
	data, index, err := tableBytes(ctx, db)
	if err != nil {
		return "size unknown: " + err.Error()
	}
	return fmt.Sprintf("the table holds %d MiB of data and %d MiB of indexes", data>>20, index>>20)
}
