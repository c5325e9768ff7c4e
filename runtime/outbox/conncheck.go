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
// into a time.Time. Without parseTime=true the driver hands back bytes and the scan fails. The
// runtime stores UTC wall times, and the driver reads and writes them as wall times of its loc:
// any zone with an offset other than zero would shift them. A zone that is UTC under another
// name (loc=Local on a host whose zone is UTC, Etc/UTC) reads the right instants.
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
	return checkZone(now.Location(), time.Now())
}

// The instants at which a driver zone must have a zero offset. Every time the runtime reads
// was written by the database clock, so 1900 to 2200 covers them with room to spare; walking
// further back would also find the local mean times that zones such as Africa/Abidjan kept
// before their first rule.
var (
	zoneFrom = time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC)
	zoneTo   = time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)
)

// checkZone refuses a driver zone whose offset is not zero at some instant between zoneFrom
// and zoneTo, naming the instant nearest now: the zone's offset now, else its next change,
// else its last. time.Location keeps its transitions private; ZoneBounds gives each zone's
// exact start and end, so the walk visits each transition once.
func checkZone(loc *time.Location, now time.Time) error {
	if loc == time.UTC {
		return nil
	}
	at, ok := nonZeroOffset(now.In(loc))
	if ok {
		name, offset := at.Zone()
		what := "at " + at.UTC().Format(time.RFC3339)
		if at.Equal(now) {
			what = "now"
		}
		fix := "use loc=UTC in the DSN"
		if loc == time.Local {
			fix += ", or run the process with TZ=UTC"
		}
		return fmt.Errorf("DSN must use loc=UTC, or a zone whose offset is zero at every instant: the driver's zone %q is %s (%s) %s, so every time the runtime reads and writes would be shifted (%s)", loc, offsetText(offset), name, what, fix)
	}
	return nil
}

// nonZeroOffset returns the instant nearest t, between zoneFrom and zoneTo, at which t's zone
// has an offset other than zero: t itself, else the start of a later zone, else the last
// instant of an earlier one.
func nonZeroOffset(t time.Time) (time.Time, bool) {
	if _, off := t.Zone(); off != 0 {
		return t, true
	}
	for u := t; u.Before(zoneTo); {
		_, end := u.ZoneBounds()
		if end.IsZero() {
			break
		}
		if _, off := end.Zone(); off != 0 {
			return end, true
		}
		u = end
	}
	for u := t; u.After(zoneFrom); {
		start, _ := u.ZoneBounds()
		if start.IsZero() {
			break
		}
		u = start.Add(-time.Nanosecond)
		if _, off := u.Zone(); off != 0 {
			return u, true
		}
	}
	return time.Time{}, false
}

// offsetText writes an offset in seconds as UTC+01:00, UTC-00:01:15.
func offsetText(seconds int) string {
	sign := "+"
	if seconds < 0 {
		sign, seconds = "-", -seconds
	}
	s := fmt.Sprintf("UTC%s%02d:%02d", sign, seconds/3600, seconds/60%60)
	if seconds%60 != 0 {
		s += fmt.Sprintf(":%02d", seconds%60)
	}
	return s
}
