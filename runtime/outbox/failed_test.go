package outbox

import (
	"context"
	"testing"
)

// Retry moves any number of rows, batch after batch.
func TestRetryMovesMoreThanOneBatch(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	enqueueN(t, db.DB, "many", retryBatch+7)
	db.MustExec(t, "UPDATE outbox_messages SET status='FAILED', failed_at=UTC_TIMESTAMP(6), next_attempt_at=LEAST(next_attempt_at, failed_at)")
	if n, err := Retry(ctx, db, Filter{}); err != nil || n != retryBatch+7 {
		t.Fatalf("Retry(all) = %d, %v; want %d", n, err, retryBatch+7)
	}
	if got := countRows(t, db, "status='PENDING' AND attempts=0"); got != retryBatch+7 {
		t.Fatalf("%d rows PENDING after Retry, want %d", got, retryBatch+7)
	}
}
