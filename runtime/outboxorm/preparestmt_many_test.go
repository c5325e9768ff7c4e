package outboxorm_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/outboxgen/outboxgen/examples/events"
	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// EnqueueMany's chunk sizes come from a fixed set, so through GORM's PrepareStmt the cache holds
// a bounded number of statements whatever the call sizes: after calls that use every chunk size
// of every statement shape, calls of other sizes add none.
func TestGORMPrepareStmtCacheStaysBoundedWithEnqueueMany(t *testing.T) {
	t.Parallel()
	db := ormDB(t)
	g := gormOn(t, db, true)
	cache, ok := g.ConnPool.(*gorm.PreparedStmtDB)
	if !ok {
		t.Fatalf("GORM's pool is %T, want *gorm.PreparedStmtDB", g.ConnPool)
	}
	ctx := context.Background()
	total := 0
	call := func(n, shape int) {
		t.Helper()
		err := g.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			var err error
			switch shape {
			case 0:
				es := make([]events.WelcomeEmail, n)
				for i := range es {
					es[i] = welcome()
				}
				_, err = events.EnqueueManyWelcomeEmail(ctx, tx.Statement.ConnPool, es, outbox.Delay(time.Duration(n)*time.Second))
			default:
				ms := make([]outbox.Message, n)
				for i := range ms {
					ms[i] = outbox.Message{EventType: "many", Payload: fmt.Appendf(nil, `{"i":%d}`, i)}
					if shape == 2 {
						ms[i].OrderingKey = fmt.Sprintf("key-%d", i%3)
					}
				}
				_, err = outbox.EnqueueMany(ctx, tx.Statement.ConnPool, ms, outbox.Header("trace", fmt.Sprint(n)))
			}
			return err
		})
		if err != nil {
			t.Fatalf("EnqueueMany of %d (shape %d): %v", n, shape, err)
		}
		total += n
	}
	// 4097 and 585 messages use every chunk size (4096, 512, 64, 8, 1).
	for shape := range 3 {
		call(4097, shape)
		call(585, shape)
	}
	cached := len(cache.Stmts.Keys())
	// 3 INSERT shapes (plain, with key or delay, queue) of 5 sizes; the settings, the read-back,
	// the key lock, its release and the key's counter.
	if cached > 3*5+5 {
		t.Errorf("GORM caches %d prepared statements after every chunk size", cached)
	}
	for shape := range 3 {
		for _, n := range []int{2, 7, 100, 777, 1500} {
			call(n, shape)
		}
	}
	if got := len(cache.Stmts.Keys()); got != cached {
		t.Errorf("GORM caches %d prepared statements after calls of other sizes, %d before: the SQL text varies", got, cached)
	}
	if got := count(t, db.DB, "SELECT COUNT(*) FROM outbox_messages"); got != total {
		t.Errorf("%d messages stored, want %d", got, total)
	}
}
