package mysqllock

import (
	"context"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/internal/testdb"
)

// BenchmarkTryDoOverhead measures what the lock adds around a one-statement critical section:
// GET_LOCK, CONNECTION_ID(), RELEASE_LOCK and pinning a connection. It reports the ratio to the
// bare statement (machine-independent enough to compare runs); it asserts nothing about time.
func BenchmarkTryDoOverhead(b *testing.B) {
	d := testdb.New(b)
	l := New(d.DB, WithWatchdog(0))
	ctx := context.Background()
	name := lockName(d, "bench")
	one := func(ctx context.Context) error {
		var n int
		return d.QueryRowContext(ctx, "SELECT 1").Scan(&n)
	}
	var plain, locked time.Duration
	for b.Loop() {
		t0 := time.Now()
		if err := one(ctx); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		ran, err := l.TryDo(ctx, name, one)
		if err != nil || !ran {
			b.Fatal(ran, err)
		}
		plain += t1.Sub(t0)
		locked += time.Since(t1)
	}
	b.ReportMetric(float64(locked)/float64(plain), "trydo/plain")
}
