package main

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// oursSystem is outboxgen's runtime with its defaults (BatchSize 100, Concurrency 16,
// PollInterval 1s), used as docs/setup.md says: outbox.Enqueue in the caller's transaction,
// outbox.InTx to commit and wake the workers of this process, one outbox.Worker per pool.
//
// The zero value is the plain system every workload compares. Two variants, still named
// outboxgen in the table, measure what a feature costs next to it:
//   - orderedKeys > 0 (workload ordered): every message carries an OrderingKey, round-robin
//     over orderedKeys keys by sequence number (orderingKey).
//   - traced (workload otel): runtime/outboxotel wired as docs/tracing.md says (setupOTel:
//     InstallEnqueue and the SDK providers), each business transaction in a request span
//     (each preloaded message in its own), and the workers built with outboxotel.Instrument.
type oursSystem struct {
	orderedKeys int
	traced      bool
}

const ourType = "bench.event"

// oursBatch and oursConcurrency override the worker's BatchSize and Concurrency when non-zero
// (--ours-batch, --ours-concurrency: levers to measure; the table uses the defaults).
var oursBatch, oursConcurrency int

func (oursSystem) name() string { return "outboxgen" }

func (oursSystem) setup(ctx context.Context, db *sql.DB) error {
	if _, err := db.ExecContext(ctx, bizDDL); err != nil {
		return err
	}
	return outbox.Migrate(ctx, db)
}

// orderingKey is the ordering key of sequence number seq over keys keys: round-robin, so that
// consecutive transactions (W1's goroutines) use different keys and a backlog holds
// n / keys messages of every key, interleaved.
func orderingKey(seq int64, keys int) string {
	return "bench:" + strconv.FormatInt(seq%int64(keys), 10)
}

func (o oursSystem) enqueue(ctx context.Context, tx *sql.Tx, payload []byte) error {
	m := outbox.Message{EventType: ourType, Payload: payload}
	if o.orderedKeys > 0 {
		seq, err := payloadSeq(payload)
		if err != nil {
			return err
		}
		m.OrderingKey = orderingKey(seq, o.orderedKeys)
	}
	_, err := outbox.Enqueue(ctx, tx, m)
	return err
}

// enqueueBatch enqueues payloads in one transaction (preloading). Ordered: by key, each key's
// messages in sequence order, so that every preloading transaction takes its keys' locks
// (outbox_ordering rows, held to commit) in the same order and none deadlocks another.
// Traced: each message in a request span of its own, as if each came from its own request.
func (o oursSystem) enqueueBatch(ctx context.Context, tx *sql.Tx, payloads [][]byte) error {
	if o.orderedKeys > 0 {
		type keyed struct {
			k int64
			p []byte
		}
		ks := make([]keyed, len(payloads))
		for i, p := range payloads {
			seq, err := payloadSeq(p)
			if err != nil {
				return err
			}
			ks[i] = keyed{seq % int64(o.orderedKeys), p}
		}
		slices.SortStableFunc(ks, func(a, b keyed) int { return int(a.k - b.k) })
		payloads = make([][]byte, len(ks))
		for i := range ks {
			payloads[i] = ks[i].p
		}
	}
	for _, p := range payloads {
		if !o.traced {
			if err := o.enqueue(ctx, tx, p); err != nil {
				return err
			}
			continue
		}
		sctx, span := requestSpan(ctx)
		err := o.enqueue(sctx, tx, p)
		span.End()
		if err != nil {
			return err
		}
	}
	return nil
}

// requestSpan starts the span of the request a traced business transaction belongs to (what an
// HTTP server's middleware would have started), from the global provider setupOTel set.
func requestSpan(ctx context.Context) (context.Context, trace.Span) {
	return otel.Tracer("outboxbench").Start(ctx, "POST /signup", trace.WithSpanKind(trace.SpanKindServer))
}

func (o oursSystem) inTx(ctx context.Context, db *sql.DB, fn func(ctx context.Context, tx *sql.Tx) error) error {
	if o.traced {
		var span trace.Span
		ctx, span = requestSpan(ctx)
		defer span.End()
	}
	return outbox.InTx(ctx, db, func(tx *sql.Tx) error { return fn(ctx, tx) })
}

// verifyDrained checks that every row is SENT: the worker recorded each result.
func (oursSystem) verifyDrained(ctx context.Context, db *sql.DB, n int) error {
	var sent, other int64
	err := db.QueryRowContext(ctx, `SELECT
		COALESCE(SUM(status = 'SENT'), 0), COALESCE(SUM(status <> 'SENT'), 0) FROM outbox_messages`).Scan(&sent, &other)
	if err != nil {
		return err
	}
	if sent != int64(n) || other != 0 {
		return fmt.Errorf("outboxgen: %d rows SENT, %d not SENT, want %d SENT", sent, other, n)
	}
	return nil
}

func (oursSystem) countMessages(ctx context.Context, db *sql.DB) (int64, error) {
	return countRows(ctx, db, "outbox_messages")
}
