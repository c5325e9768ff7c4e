package main

import (
	"bytes"
	"context"
	"database/sql"
	"os"
	"sync"
	"testing"
	"time"
)

func TestKindOfVersion(t *testing.T) {
	for _, c := range []struct{ v, name string }{
		{"10.11.19-MariaDB", "MariaDB"},
		{"11.8.3-MariaDB-log", "MariaDB"},
		{"5.5.5-10.11.6-MariaDB-0+deb12u1", "MariaDB"},
		{"9.7.4-2", "MySQL"},
		{"8.0.40", "MySQL"},
	} {
		if got := kindOfVersion(c.v); got.Name != c.name || got.Version != c.v {
			t.Errorf("kindOfVersion(%q) = %+v, want %s", c.v, got, c.name)
		}
	}
}

// TestWatermillRoundTrip publishes through watermill's publisher in both driver modes on the
// server of OUTBOX_TEST_DSN (MariaDB or MySQL, schema chosen as the bench does) and checks that
// every payload comes back byte for byte: on MySQL a JSON payload column would refuse the
// interpolated insert (error 3144) or reorder the payload's keys.
func TestWatermillRoundTrip(t *testing.T) {
	dsn := os.Getenv("OUTBOX_TEST_DSN")
	if dsn == "" {
		t.Skip("OUTBOX_TEST_DSN not set")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv := server{dsn: dsn}
	kind, err := srv.kind(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func(old bool) { wmOnMySQL = old }(wmOnMySQL)
	wmOnMySQL = kind.isMySQL()
	t.Logf("server %s", kind)
	name, drop, err := srv.freshDB(ctx, "wmtest")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := drop(); err != nil {
			t.Error(err)
		}
	}()
	w := watermillSystem{}
	var want [][]byte
	for i, mode := range dsnModes {
		db, _, err := srv.open(name, mode)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if i == 0 {
			if err := w.setup(ctx, db); err != nil {
				t.Fatal(err)
			}
		}
		ps := [][]byte{makePayload(int64(2*i), time.Now()), makePayload(int64(2*i+1), time.Now())}
		if err := w.inTx(ctx, db, func(ctx context.Context, tx *sql.Tx) error { return w.enqueue(ctx, tx, ps[0]) }); err != nil {
			t.Fatalf("%s: enqueue: %v", mode.Name, err)
		}
		if err := w.inTx(ctx, db, func(ctx context.Context, tx *sql.Tx) error { return w.enqueueBatch(ctx, tx, ps[1:]) }); err != nil {
			t.Fatalf("%s: enqueueBatch: %v", mode.Name, err)
		}
		want = append(want, ps...)
	}
	db, _, err := srv.open(name, dsnModes[0])
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var mu sync.Mutex
	var got [][]byte
	done := make(chan struct{})
	cons, err := w.consume(ctx, db, consumerConfig{PollInterval: 50 * time.Millisecond}, func(p []byte) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, bytes.Clone(p))
		if len(got) == len(want) {
			close(done)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-ctx.Done():
	}
	drainErr := waitDrained(ctx, w, db, len(want)) // the last ack is written after the handler
	if cc := cons.counts(); cc.Claims < 1 || cc.Empty > cc.Claims {
		t.Errorf("counted %d polls, %d empty: want at least one poll that found messages", cc.Claims, cc.Empty)
	}
	if err := cons.stop(); err != nil {
		t.Error(err)
	}
	if drainErr != nil {
		t.Error(drainErr)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != len(want) {
		t.Fatalf("handled %d messages, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Errorf("message %d came back as\n%s\nwant\n%s", i, got[i], want[i])
		}
	}
}
