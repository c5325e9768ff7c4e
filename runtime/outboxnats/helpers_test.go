package outboxnats_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"os"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// The tests run a real nats-server with JetStream inside the test process (a temp store dir, a
// free loopback port) and, for the relay tests, a real database on the server that
// OUTBOX_TEST_DSN names (scripts/test sets it, once per supported server).

// natsServer is an embedded nats-server that a test can stop and start again on the same port
// and store, as an operator's restart would.
type natsServer struct {
	t    testing.TB
	opts server.Options
	srv  *server.Server
	url  string
}

func startNATS(t testing.TB) *natsServer {
	t.Helper()
	ns := &natsServer{t: t, opts: server.Options{
		Host:      "127.0.0.1",
		Port:      -1,
		JetStream: true,
		StoreDir:  t.TempDir(),
		NoLog:     true,
		NoSigs:    true,
		// Small limits keep several parallel servers cheap; the tests store kilobytes.
		JetStreamMaxMemory: 64 << 20,
		JetStreamMaxStore:  256 << 20,
	}}
	ns.start()
	ns.opts.Port = ns.srv.Addr().(*net.TCPAddr).Port
	ns.url = ns.srv.ClientURL()
	t.Cleanup(ns.stop)
	return ns
}

func (ns *natsServer) start() {
	ns.t.Helper()
	opts := ns.opts
	srv, err := server.NewServer(&opts)
	if err != nil {
		ns.t.Fatalf("nats-server: %v", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(20 * time.Second) {
		ns.t.Fatal("nats-server: not ready for connections within 20s")
	}
	ns.srv = srv
}

// stop shuts the server down and waits until it is gone (idempotent).
func (ns *natsServer) stop() {
	if ns.srv == nil {
		return
	}
	ns.srv.Shutdown()
	ns.srv.WaitForShutdown()
	ns.srv = nil
}

// restart starts the server again on the same port and store dir: the streams come back.
func (ns *natsServer) restart() { ns.start() }

// connect returns a JetStream context on a connection that reconnects for ever, quickly, as a
// relay in production should.
func (ns *natsServer) connect(t testing.TB) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(ns.url, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond),
		nats.RetryOnFailedConnect(true))
	if err != nil {
		t.Fatalf("nats connect: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	return nc, js
}

// createStream makes a file-backed stream on subjects with a duplicate window of dup.
func createStream(t testing.TB, js jetstream.JetStream, name string, dup time.Duration, subjects ...string) jetstream.Stream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: name, Subjects: subjects, Storage: jetstream.FileStorage, Duplicates: dup,
	})
	if err != nil {
		t.Fatalf("create stream %s: %v", name, err)
	}
	return s
}

// storedMsgs returns every message of the stream, in stream order.
func storedMsgs(t testing.TB, s jetstream.Stream) []*jetstream.RawStreamMsg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatalf("stream info: %v", err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("stream get %d: %v", seq, err)
		}
		out = append(out, m)
	}
	return out
}

// testDB is one test's database: created on OUTBOX_TEST_DSN's server, migrated with
// outbox.Migrate, dropped when the test ends. Without OUTBOX_TEST_DSN the test is skipped.
type testDB struct {
	*sql.DB
	DSN string
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
	name := "outboxnats_" + hex.EncodeToString(rnd[:])
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
	dsn := cfg.FormatDSN()
	db, err := sql.Open("mysql", dsn)
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
	return &testDB{DB: db, DSN: dsn}
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

func (db *testDB) stats(t testing.TB) outbox.Snapshot {
	t.Helper()
	s, err := outbox.Stats(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// fast is a relay policy for tests: retries come within tens of milliseconds.
var fast = outbox.Policy{Backoff: outbox.Backoff{Initial: 20 * time.Millisecond, Max: 100 * time.Millisecond}, Timeout: 5 * time.Second}

// running is a worker started by startWorker.
type running struct {
	cancel context.CancelFunc
	done   chan error
}

func startWorker(t testing.TB, db *sql.DB, r *outbox.Router, cfg outbox.Config) *running {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quietLogger()
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 50 * time.Millisecond
	}
	w, err := outbox.NewWorker(db, r, cfg)
	if err != nil {
		t.Fatalf("NewWorker: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rw := &running{cancel: cancel, done: make(chan error, 1)}
	go func() { rw.done <- w.Run(ctx) }()
	t.Cleanup(func() { rw.stop(t) })
	return rw
}

// stop cancels Run and waits for it (idempotent).
func (rw *running) stop(t testing.TB) {
	t.Helper()
	if rw.cancel == nil {
		return
	}
	rw.cancel()
	rw.cancel = nil
	select {
	case err := <-rw.done:
		if err != nil {
			t.Errorf("worker Run: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Error("worker Run did not return within 60s of its cancel")
	}
}

// waitFor polls cond every 20ms until it holds, or fails the test after d.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitDrained waits until no row is PENDING or PROCESSING, then fails the test if any is FAILED.
func waitDrained(t testing.TB, db *testDB, d time.Duration) {
	t.Helper()
	waitFor(t, d, "every message to leave PENDING and PROCESSING", func() bool {
		s := db.stats(t)
		return s.Pending == 0 && s.Processing == 0
	})
	if s := db.stats(t); s.Failed != 0 {
		failed, err := outbox.ListFailed(context.Background(), db, outbox.Filter{}, 5)
		t.Fatalf("%d messages FAILED, want none: %+v %v", s.Failed, failed, err)
	}
}
