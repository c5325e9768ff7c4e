package outboxorm_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/outboxgen/outboxgen/examples/events"
	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// GORM with PrepareStmt caches one prepared statement per SQL text, for a day by default. An
// enqueue's text must not vary with the message, so 20,000 enqueues in GORM transactions,
// plain, delayed and ordered, leave a handful of statements cached, not one per message. The
// heap before and after is logged, not asserted.
func TestGORMPrepareStmtCacheStaysBounded(t *testing.T) {
	t.Parallel()
	const (
		n = 20000
		// The statements of an enqueue: the plain INSERT; the INSERT with an ordering key or a
		// delay; an ordered message's key lock, counter, unlock and queue entry.
		maxCached = 6
	)
	db := ormDB(t)
	g := gormOn(t, db, true)
	cache, ok := g.ConnPool.(*gorm.PreparedStmtDB)
	if !ok {
		t.Fatalf("GORM's pool is %T, want *gorm.PreparedStmtDB", g.ConnPool)
	}
	ctx := context.Background()
	heapBefore := heapAfterGC()
	start := time.Now()
	for i := range n {
		err := g.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			var err error
			switch i % 10 {
			case 0:
				_, err = outbox.Enqueue(ctx, tx.Statement.ConnPool, outbox.Message{
					EventType: "ordered", Payload: fmt.Appendf(nil, `{"i":%d}`, i), OrderingKey: fmt.Sprintf("key-%d", i%7),
				})
			case 5:
				_, err = events.EnqueueWelcomeEmail(ctx, tx.Statement.ConnPool, welcome(), outbox.Delay(time.Duration(i)*time.Second))
			default:
				_, err = events.EnqueueWelcomeEmail(ctx, tx.Statement.ConnPool, welcome(), outbox.Header("trace", fmt.Sprint(i)))
			}
			return err
		})
		if err != nil {
			t.Fatalf("enqueue %d: %v", i, err)
		}
		// Checked as it goes, so that a text varying with the values fails after a few
		// statements instead of filling the server's prepared-statement limit.
		if done := i + 1; done == 10 || done%1000 == 0 {
			if got := len(cache.Stmts.Keys()); got > maxCached {
				t.Fatalf("after %d enqueues GORM caches %d prepared statements, want at most %d: the SQL text varies with the message", done, got, maxCached)
			}
		}
	}
	took := time.Since(start)
	heapAfter := heapAfterGC()
	if got := count(t, db.DB, "SELECT COUNT(*) FROM outbox_messages"); got != n {
		t.Errorf("%d messages stored, want %d", got, n)
	}
	t.Logf("%d enqueues in GORM PrepareStmt transactions (%s): %d statements cached; heap after GC %.1f MB before, %.1f MB after",
		n, took.Round(time.Millisecond), len(cache.Stmts.Keys()), float64(heapBefore)/(1<<20), float64(heapAfter)/(1<<20))
}

func heapAfterGC() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
