package outbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// checkBinlog refuses a server on which the worker's READ COMMITTED writes fail. With the binary
// log on, binlog_format=STATEMENT rejects them (error 1665). Without the check, that would show
// only as every claim failing.
func checkBinlog(ctx context.Context, db DBTX) error {
	b, err := q.ServerBinlog(ctx, sdb(db))
	if err != nil {
		return fmt.Errorf("read binlog settings: %w", err)
	}
	if b.LogBin == 1 && strings.EqualFold(b.BinlogFormat, "STATEMENT") {
		return errors.New("the server logs with binlog_format=STATEMENT, which rejects every write of a READ COMMITTED transaction (error 1665) that the worker makes: use ROW or MIXED (SET GLOBAL binlog_format = 'ROW', or in the DSN binlog_format=ROW)")
	}
	return nil
}

// checkClock verifies the DSN settings the runtime relies on by scanning the database clock
// into a time.Time. Without parseTime=true the driver hands back bytes and the scan fails. With
// a loc other than UTC the driver labels UTC wall times with another zone, which would shift
// every time the runtime reads.
func checkClock(ctx context.Context, db DBTX) error {
	now, err := q.ClockNow(ctx, sdb(db))
	if err != nil {
		// database/sql's conversion error is untyped; its text is stable (convertAssign):
		// "unsupported Scan, storing driver.Value type []uint8 into type *time.Time".
		if strings.Contains(err.Error(), "unsupported Scan") {
			return fmt.Errorf("DSN must set parseTime=true (scanning UTC_TIMESTAMP(6) into a time.Time failed: %w)", err)
		}
		return fmt.Errorf("connection check: %w", err)
	}
	if now.Location() != time.UTC {
		return fmt.Errorf("DSN must use loc=UTC (the driver returned times in %q)", now.Location())
	}
	return nil
}
