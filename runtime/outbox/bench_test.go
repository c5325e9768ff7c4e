package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/internal/testdb"
)

// The business side of the enqueue benchmarks: a signup that inserts a company.
func benchBusinessDB(b *testing.B) *testdb.DB {
	b.Helper()
	db := migrated(b)
	db.MustExec(b, `CREATE TABLE companies (
		id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
		name VARCHAR(191) NOT NULL,
		email VARCHAR(191) NOT NULL,
		created_at DATETIME(6) NOT NULL
	) ENGINE = InnoDB`)
	return db
}

func signup(ctx context.Context, tx *sql.Tx, i int) (int64, error) {
	res, err := tx.ExecContext(ctx, "INSERT INTO companies (name, email, created_at) VALUES (?, ?, UTC_TIMESTAMP(6))",
		"company "+strconv.Itoa(i), "owner"+strconv.Itoa(i)+"@example.com")
	if err != nil {
		return 0, err
	}
	return res.LastInsertId()
}

func bareTx(ctx context.Context, db *sql.DB, i int) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if _, err := signup(ctx, tx, i); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

func enqueueTx(ctx context.Context, db *sql.DB, i int) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	id, err := signup(ctx, tx, i)
	if err == nil {
		payload := []byte(`{"company_id":` + strconv.FormatInt(id, 10) + `,"email":"owner` + strconv.Itoa(i) + `@example.com","plan":"pro"}`)
		_, err = Enqueue(ctx, tx, Message{EventType: "welcome_email", Payload: payload, IdempotencyKey: "company_id:" + strconv.FormatInt(id, 10)})
	}
	if err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// BenchmarkBusinessTx is the bare business transaction: BEGIN, INSERT a company, COMMIT.
func BenchmarkBusinessTx(b *testing.B) {
	db := benchBusinessDB(b)
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := bareTx(ctx, db.DB, i); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEnqueue is the same transaction plus outbox.Enqueue. It interleaves bare and
// enqueue transactions on one pool so both see the same server state, and reports
// bare_ns/op and the ratio bare/enqueue (throughput of enqueue relative to the bare
// transaction: 1.0 means free; the target is >= 0.85).
func BenchmarkEnqueue(b *testing.B) {
	db := benchBusinessDB(b)
	ctx := context.Background()
	// Warm the pool and the tables so the first iterations do not pay for it.
	for i := 0; i < 50; i++ {
		if err := bareTx(ctx, db.DB, i); err != nil {
			b.Fatal(err)
		}
		if err := enqueueTx(ctx, db.DB, i); err != nil {
			b.Fatal(err)
		}
	}
	var bare, enq time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if err := bareTx(ctx, db.DB, i); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := enqueueTx(ctx, db.DB, i); err != nil {
			b.Fatal(err)
		}
		bare += t1.Sub(t0)
		enq += time.Since(t1)
	}
	b.StopTimer()
	b.ReportMetric(float64(enq.Nanoseconds())/float64(b.N), "enqueue_ns/op")
	b.ReportMetric(float64(bare.Nanoseconds())/float64(b.N), "bare_ns/op")
	b.ReportMetric(float64(bare)/float64(enq), "bare/enqueue")
}

// BenchmarkEnqueueParallel is BenchmarkEnqueue with concurrent callers (GOMAXPROCS x 4).
func BenchmarkEnqueueParallel(b *testing.B) {
	db := benchBusinessDB(b)
	db.SetMaxOpenConns(64)
	db.SetMaxIdleConns(64)
	ctx := context.Background()
	run := func(name string, fn func(context.Context, *sql.DB, int) error) time.Duration {
		var n atomic.Int64
		t0 := time.Now()
		b.SetParallelism(4)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := fn(ctx, db.DB, int(n.Add(1))); err != nil {
					b.Error(name, err)
					return
				}
			}
		})
		return time.Since(t0)
	}
	b.ResetTimer()
	bare := run("bare", bareTx)
	enq := run("enqueue", enqueueTx)
	b.StopTimer()
	b.ReportMetric(float64(bare)/float64(enq), "bare/enqueue")
}

// BenchmarkDrain preloads b.N messages and measures a worker draining them with a no-op
// handler, from Run until every result is recorded (Run returned). Reports msg/s.
// held_oldest drains while another transaction holds the oldest rows FOR UPDATE (a hung
// worker's claim, an admin's forgotten SELECT ... FOR UPDATE): more than the claim's candidate
// windows cover, so every claim that scans from the front falls back to the index scan.
// Compare its msg/s with default's in the same run.
func BenchmarkDrain(b *testing.B) {
	for _, c := range []struct {
		name string
		cfg  Config
		held int // oldest rows locked by another transaction for the whole drain
	}{
		{"default", Config{}, 0},
		{"c64_b200", Config{Concurrency: 64, BatchSize: 200}, 0},
		{"held_oldest", Config{}, 2 * claimRounds * 2 * DefaultBatchSize},
	} {
		b.Run(c.name, func(b *testing.B) {
			db := migrated(b)
			ctx := context.Background()
			b.StopTimer()
			payload := json.RawMessage(`{"company_id":42,"email":"owner@example.com","plan":"pro"}`)
			for start := 0; start < b.N; start += 1000 {
				err := InTx(ctx, db.DB, func(tx *sql.Tx) error {
					for i := start; i < start+1000 && i < b.N; i++ {
						if _, err := Enqueue(ctx, tx, Message{EventType: "drain", Payload: payload, IdempotencyKey: "k" + strconv.Itoa(i)}); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			held := min(c.held, b.N/2)
			if held > 0 {
				lockTx, err := db.BeginTx(ctx, nil)
				if err != nil {
					b.Fatal(err)
				}
				defer func() { _ = lockTx.Rollback() }() // only a read lock to give up
				rows, err := lockTx.QueryContext(ctx, "SELECT id FROM outbox_messages ORDER BY id LIMIT ? FOR UPDATE", held)
				if err != nil {
					b.Fatal(err)
				}
				locked := 0
				for rows.Next() {
					locked++
				}
				if err := errors.Join(rows.Err(), rows.Close()); err != nil || locked != held {
					b.Fatalf("locking the oldest %d rows: %d, %v", held, locked, err)
				}
			}
			var handled atomic.Int64
			runCtx, cancel := context.WithCancel(ctx)
			defer cancel()
			n := int64(b.N - held)
			r := NewRouter()
			r.Handle("drain", Policy{}, func(context.Context, json.RawMessage, Delivery) error {
				if handled.Add(1) == n {
					cancel()
				}
				return nil
			})
			cfg := c.cfg
			cfg.Logger = testLogger()
			obs := &benchObserver{}
			cfg.Observer = obs
			w, err := NewWorker(db.DB, r, cfg)
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			t0 := time.Now()
			if err := w.Run(runCtx); err != nil {
				b.Fatal(err)
			}
			took := time.Since(t0)
			b.StopTimer()
			if got := countRows(b, db, "status='SENT'"); got != int(n) {
				b.Fatalf("%d of %d SENT", got, n)
			}
			b.ReportMetric(float64(n)/took.Seconds(), "msg/s")
			if held > 0 {
				b.ReportMetric(float64(w.claimFallbacks.Load()), "fallbacks")
			}
			if n := obs.claims.Load(); n > 0 {
				b.ReportMetric(float64(obs.rows.Load())/float64(n), "rows/claim")
				b.ReportMetric(float64(obs.claimNs.Load())/float64(n)/1e6, "ms/claim")
			}
		})
	}
}

// benchObserver shows where a drain's time goes: claims, rows per claim, time per claim.
type benchObserver struct {
	NopObserver
	claims, rows, claimNs atomic.Int64
}

func (o *benchObserver) Claimed(n int, d time.Duration) {
	o.claims.Add(1)
	o.rows.Add(int64(n))
	o.claimNs.Add(int64(d))
}
