// What retention does, for metrics and the status command: the rows each pass deleted
// (RetentionObserver) and the age of the oldest SENT row kept (OldestSent).

package outbox

import (
	"context"
	"fmt"
	"time"
)

// The tables a cleaning pass deletes from, as RetentionObserver.Retained names them.
const (
	TableMessages = "outbox_messages"
	TableOrdering = "outbox_ordering"
	TableJobRuns  = "outbox_job_runs"
)

// RetentionObserver is an optional extension of Observer. A worker whose Observer implements it
// reports the rows each of its cleaning passes deleted (see Retention).
type RetentionObserver interface {
	// Retained: a cleaning pass deleted n rows (n > 0) of table: TableMessages (SENT and
	// FAILED rows), TableOrdering (counters of keys with nothing queued), TableJobRuns or
	// TableInbox (expired Once keys).
	Retained(table string, n int64)
}

// observeRetained passes p's counts to the worker's Observer when it is a RetentionObserver.
func (w *Worker) observeRetained(p retentionPass) {
	o, ok := w.cfg.Observer.(RetentionObserver)
	if !ok {
		return
	}
	for _, c := range []struct {
		table string
		n     int64
	}{{TableMessages, p.Sent + p.Failed}, {TableOrdering, p.Counters}, {TableJobRuns, p.JobRuns}, {TableInbox, p.Inbox}} {
		if c.n > 0 {
			o.Retained(c.table, c.n)
		}
	}
}

// OldestSent returns how long ago the oldest SENT row still in the table was sent, by the
// database clock, and false when there is none. It reads one index entry: the SENT row due
// first, which is the oldest to within the delivery lag. With retention on, it stays near
// Config.Retention.Sent; far above it, no worker of that row's type is cleaning.
func OldestSent(ctx context.Context, db DBTX) (time.Duration, bool, error) {
	ages, err := q.RetentionOldestSent(ctx, sdb(db))
	if err != nil {
		return 0, false, fmt.Errorf("outbox: OldestSent: %w", explain(err))
	}
	if len(ages) == 0 {
		return 0, false, nil
	}
	return time.Duration(max(ages[0], 0)) * time.Microsecond, true, nil
}
