package outbox

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/internal/testutil"
)

// Purge and the retention cleaner delete SENT rows while two workers drain the table: every
// message is delivered exactly once, and none is left behind.
func TestPurgeBesideTwoWorkersDraining(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	const n = 600
	c := newCalls()
	r := NewRouter()
	r.Handle("ret_p", Policy{}, func(_ context.Context, raw json.RawMessage, d Delivery) error {
		c.add(d, raw)
		return nil
	})
	ids := enqueueN(t, db.DB, "ret_p", n)
	// Retention.Sent of 1µs: the cleaner deletes a SENT row at its first pass after the mark.
	cfg := Config{ReclaimInterval: 20 * time.Millisecond, BatchSize: 20, Retention: Retention{Sent: time.Microsecond}}
	w1, w2 := newTestWorker(t, db.DB, r, cfg), newTestWorker(t, db.DB, r, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	var purged int64
	var purgeErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			k, err := Purge(ctx, db.DB, PurgeFilter{Status: StatusSent, BatchSize: 10})
			purged += k
			if err != nil && ctx.Err() == nil {
				purgeErr = err
				return
			}
		}
	}()
	start(t, w1)
	start(t, w2)
	testutil.Eventually(t, 30*time.Second, "every message delivered", func() bool { return c.total() >= n })
	cancel()
	wg.Wait()
	if purgeErr != nil {
		t.Fatalf("Purge: %v", purgeErr)
	}
	// The cleaners delete what the purge left.
	testutil.Eventually(t, 10*time.Second, "the table empty", func() bool { return countRows(t, db, "1=1") == 0 })
	for _, id := range ids {
		if k := c.of(id); k != 1 {
			t.Errorf("message %d delivered %d times, want once", id, k)
		}
	}
	if c.total() != n {
		t.Errorf("%d deliveries, want %d", c.total(), n)
	}
	t.Logf("the purge deleted %d rows, the cleaners %d", purged, n-int(purged))
}
