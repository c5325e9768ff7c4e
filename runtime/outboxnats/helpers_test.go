package outboxnats_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
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
