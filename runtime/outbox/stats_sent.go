// Snapshot.OldestSent: what retention has kept longest, for Stats and the metrics built on it.

package outbox

import "context"

// oldestSent is the age of the SENT row due first, the oldest SENT row to within the delivery
// lag, or 0 when there is none.
func oldestSent(ctx context.Context, db DBTX) (age int64, err error) {
	ages, err := q.StatsOldestSent(ctx, sdb(db))
	if err != nil || len(ages) == 0 {
		return 0, err
	}
	return max(ages[0], 0), nil
}
