// Retention of the mysqllock run ledger (outbox_job_runs): a row per job and period, of which
// only the latest period's row is ever read to decide whether a run happens.

package outbox

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/outboxgen/outboxgen/runtime/internal/store"
)

const (
	// jobRunsKeep is how long ledger rows older than their job's latest period stay, as the
	// history mysqllock.Runs and the console show.
	jobRunsKeep = 7 * 24 * time.Hour
	// jobRunsBatch is the most ledger rows one DELETE removes.
	jobRunsBatch = 1000
)

// dropOldJobRuns deletes, for every job, the ledger rows older than its latest period and than
// jobRunsKeep, and returns how many it deleted. A job's latest row always stays.
func dropOldJobRuns(ctx context.Context, conn *sql.Conn) (int64, error) {
	jobs, err := q.RetentionJobLatest(ctx, conn)
	if err != nil {
		return 0, fmt.Errorf("retention job ledger: %w", err)
	}
	var total int64
	for _, j := range jobs {
		for {
			n, err := q.RetentionDeleteJobRuns(ctx, conn, store.RetentionDeleteJobRunsParams{
				Job: j.Job, Latest: j.Latest, OlderThanUs: jobRunsKeep.Microseconds(), Limit: jobRunsBatch,
			})
			total += n
			if err != nil {
				return total, fmt.Errorf("retention job ledger: %w", err)
			}
			if n < jobRunsBatch {
				break
			}
		}
	}
	return total, nil
}
