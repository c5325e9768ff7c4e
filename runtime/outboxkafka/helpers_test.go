package outboxkafka_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// The tests run franz-go's kfake, a Kafka cluster in the test process that speaks the real
// protocol to a real kgo client, and, for the relay tests, a real database on the server that
// OUTBOX_TEST_DSN names (scripts/test sets it, once per supported server).

// cluster is a kfake cluster with topics already made (partitions each).
func cluster(t testing.TB, partitions int32, topics ...string) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, topics...))
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// producer is a relay's client: franz-go's defaults (the idempotent producer), no linger, and
// metadata refreshed after 50ms instead of 5s, so the client's own retries after a "not leader"
// (which wait for fresh metadata) take milliseconds.
func producer(t testing.TB, c *kfake.Cluster, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	base := []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...), kgo.ProducerLinger(0), kgo.MetadataMinAge(50 * time.Millisecond)}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		t.Fatalf("kgo: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// consumeAll reads topics from the start until want records have come and then 300ms more
// pass without another (so a duplicate would be seen), or fails after 30s.
func consumeAll(t testing.TB, c *kfake.Cluster, want int, topics ...string) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []*kgo.Record
	deadline := time.Now().Add(30 * time.Second)
	var quietSince time.Time
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachError(func(topic string, p int32, err error) {
			if err != context.DeadlineExceeded {
				t.Errorf("fetch %s/%d: %v", topic, p, err)
			}
		})
		n := len(out)
		out = append(out, fs.Records()...)
		switch {
		case len(out) > n:
			quietSince = time.Time{}
		case len(out) >= want && quietSince.IsZero():
			quietSince = time.Now()
		case len(out) >= want && time.Since(quietSince) > 300*time.Millisecond:
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("consumed %d records in 30s, want %d", len(out), want)
		}
	}
}

func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// failProduce makes the cluster answer the next n produce requests with code on every
// partition, and counts them.
func failProduce(c *kfake.Cluster, n int64, code *kerr.Error) *atomic.Int64 {
	var failed atomic.Int64
	c.ControlKey(int16(kmsg.Produce), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		if failed.Load() >= n {
			return nil, nil, false // the cluster handles it; this control is dropped
		}
		c.KeepControl()
		failed.Add(1)
		req := kreq.(*kmsg.ProduceRequest)
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = code.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	return &failed
}

// testDB is one test's database: created on OUTBOX_TEST_DSN's server, migrated with
// outbox.Migrate, dropped when the test ends. Without OUTBOX_TEST_DSN the test is skipped.
type testDB struct {
	*sql.DB
}

func newDB(t testing.TB) *testDB {
	t.Helper()
	serverDSN := os.Getenv("OUTBOX_TEST_DSN")
	if serverDSN == "" {
		t.Skip("OUTBOX_TEST_DSN is not set: this test needs a MySQL or MariaDB server; scripts/test starts one and sets it")
	}
	cfg, err := mysql.ParseDSN(serverDSN)
	if err != nil {
		t.Fatalf("parse OUTBOX_TEST_DSN: %v", err)
	}
	var rnd [5]byte
	_, _ = rand.Read(rnd[:])
	name := "outboxkafka_" + hex.EncodeToString(rnd[:])
	admin, err := sql.Open("mysql", serverDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE `"+name+"`"); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	cfg.DBName, cfg.ParseTime, cfg.Loc = name, true, time.UTC
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		db.Close()
		admin, err := sql.Open("mysql", serverDSN)
		if err != nil {
			t.Errorf("drop %s: %v", name, err)
			return
		}
		defer admin.Close()
		if _, err := admin.Exec("DROP DATABASE IF EXISTS `" + name + "`"); err != nil {
			t.Errorf("drop %s: %v", name, err)
		}
	})
	if err := outbox.Migrate(ctx, db); err != nil {
		t.Fatalf("outbox.Migrate: %v", err)
	}
	return &testDB{DB: db}
}

func (db *testDB) enqueue(t testing.TB, eventType, payload, key string, opts ...outbox.EnqueueOption) outbox.MessageID {
	t.Helper()
	id, err := outbox.Enqueue(context.Background(), db, outbox.Message{
		EventType: eventType, Payload: json.RawMessage(payload), IdempotencyKey: key, MaxAttempts: 1000,
	}, append(opts, outbox.Standalone())...)
	if err != nil {
		t.Fatalf("enqueue %s: %v", eventType, err)
	}
	return id
}

// enqueueOrdered enqueues a message with an ordering key (and no idempotency key).
func (db *testDB) enqueueOrdered(t testing.TB, eventType, payload, orderingKey string) outbox.MessageID {
	t.Helper()
	id, err := outbox.Enqueue(context.Background(), db, outbox.Message{
		EventType: eventType, Payload: json.RawMessage(payload), OrderingKey: orderingKey, MaxAttempts: 1000,
	}, outbox.Standalone())
	if err != nil {
		t.Errorf("enqueue %s for %s: %v", eventType, orderingKey, err)
	}
	return id
}

func (db *testDB) inspect(t testing.TB, id outbox.MessageID) outbox.Record {
	t.Helper()
	r, err := outbox.Inspect(context.Background(), db, id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// waitDrained waits until no row is PENDING or PROCESSING, then fails the test if any is FAILED.
func waitDrained(t testing.TB, db *testDB, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		s, err := outbox.Stats(context.Background(), db)
		if err != nil {
			t.Fatal(err)
		}
		if s.Pending == 0 && s.Processing == 0 {
			if s.Failed != 0 {
				failed, err := outbox.ListFailed(context.Background(), db, outbox.Filter{}, 5)
				t.Fatalf("%d messages FAILED, want none: %+v %v", s.Failed, failed, err)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for every message to leave PENDING and PROCESSING: %+v", d, s)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// fast is a relay policy for tests: retries come within tens of milliseconds.
var fast = outbox.Policy{Backoff: outbox.Backoff{Initial: 20 * time.Millisecond, Max: 100 * time.Millisecond}, Timeout: 5 * time.Second}

// startWorker runs a worker until the test ends.
func startWorker(t testing.TB, db *sql.DB, r *outbox.Router, cfg outbox.Config) {
	t.Helper()
	cfg.Logger = quietLogger()
	cfg.PollInterval = 50 * time.Millisecond
	w, err := outbox.NewWorker(db, r, cfg)
	if err != nil {
		t.Fatalf("NewWorker: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("worker Run: %v", err)
		}
	})
}

func messageID(t testing.TB, r *kgo.Record) outbox.MessageID {
	t.Helper()
	id, err := strconv.ParseInt(header(r, "outbox-message-id"), 10, 64)
	if err != nil {
		t.Fatalf("record %s/%d@%d: outbox-message-id %q", r.Topic, r.Partition, r.Offset, header(r, "outbox-message-id"))
	}
	return outbox.MessageID(id)
}
