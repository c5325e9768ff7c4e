// Waiting for the server to be done with a bulk fill before a measurement: its dirty pages
// written back and its undo purged. A table that grew over months has neither pending, and a
// drain measured right after a fill of gigabytes would measure the fill's write-back instead.

package main

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"time"
)

// settleServer waits until the server's page cleaner has stopped writing (no page flushed for
// three seconds) or at most 1% of the buffer pool's pages are dirty, and the history list is
// under 1,000, or until limit passed, and says what it saw. The server's own page cleaner does
// the writing; nothing is changed on it. MariaDB's cleaner stops at its dirty-page low-water
// mark, so a few percent of the pool can stay dirty for good.
func settleServer(ctx context.Context, db *sql.DB, limit time.Duration) string {
	start := time.Now()
	dirty0, total, err := dirtyPages(ctx, db)
	if err != nil {
		return "not settled: " + err.Error()
	}
	hist0 := historyLength(ctx, db)
	var flushed [4]int64 // Innodb_buffer_pool_pages_flushed over the last four seconds
	for i := 0; ; i++ {
		dirty, _, err := dirtyPages(ctx, db)
		if err != nil {
			return "not settled: " + err.Error()
		}
		f, err := globalStatus(ctx, db, "Innodb_buffer_pool_pages_flushed")
		if err != nil {
			return "not settled: " + err.Error()
		}
		copy(flushed[:], flushed[1:])
		flushed[3] = f
		idle := i >= 3 && flushed[0] == f
		hist := historyLength(ctx, db)
		h, herr := strconv.ParseInt(hist, 10, 64)
		done := (idle || dirty*100 <= total) && herr == nil && h < 1000
		if done || time.Since(start) > limit || ctx.Err() != nil {
			verb := "settled"
			if !done {
				verb = "gave up settling"
			}
			return fmt.Sprintf("%s in %.0f s: dirty pages %d -> %d of %d, history list length %s -> %s",
				verb, time.Since(start).Seconds(), dirty0, dirty, total, hist0, hist)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// dirtyPages reads the buffer pool's dirty and total page counts.
func dirtyPages(ctx context.Context, db *sql.DB) (dirty, total int64, err error) {
	dirty, err = globalStatus(ctx, db, "Innodb_buffer_pool_pages_dirty")
	if err != nil {
		return 0, 0, err
	}
	total, err = globalStatus(ctx, db, "Innodb_buffer_pool_pages_total")
	return dirty, total, err
}

// globalStatus reads one numeric server status variable.
func globalStatus(ctx context.Context, db *sql.DB, name string) (int64, error) {
	var n string
	var v int64
	if err := db.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE '"+name+"'").Scan(&n, &v); err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	return v, nil
}
