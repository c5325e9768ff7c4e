package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/internal/testutil"
)

func TestConfigValidation(t *testing.T) {
	db := migrated(t)
	r := NewRouter()
	r.Handle("cfg", Policy{Timeout: time.Minute}, func(context.Context, json.RawMessage, Delivery) error { return nil })
	cases := []struct {
		cfg  Config
		want string
	}{
		{Config{BatchSize: -1}, "Config.BatchSize"},
		{Config{BatchSize: 1 << 20}, "Config.BatchSize"},
		{Config{Concurrency: -3}, "Config.Concurrency"},
		{Config{PollInterval: -time.Second}, "Config.PollInterval"},
		{Config{StaleAfter: -time.Second}, "Config.StaleAfter"},
		{Config{ShutdownTimeout: -time.Second}, "Config.ShutdownTimeout"},
		{Config{ReclaimInterval: -time.Second}, "Config.ReclaimInterval"},
		{Config{StaleAfter: time.Minute}, `event "cfg": timeout 1m0s is not shorter than Config.StaleAfter`},
		{Config{StaleAfter: 30 * time.Second}, `event "cfg"`},
	}
	for _, c := range cases {
		_, err := NewWorker(db.DB, r, c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewWorker(%+v) err = %v, want it to name %q", c.cfg, err, c.want)
		}
	}
	if _, err := NewWorker(db.DB, NewRouter(), Config{}); err == nil {
		t.Error("empty router: want an error")
	}
	if _, err := NewWorker(nil, r, Config{}); err == nil {
		t.Error("nil db: want an error")
	}
	w, err := NewWorker(db.DB, r, Config{})
	if err != nil {
		t.Fatalf("zero Config: %v", err)
	}
	want := Config{BatchSize: 100, Concurrency: 16, PollInterval: time.Second, StaleAfter: 5 * time.Minute,
		ShutdownTimeout: 30 * time.Second, ReclaimInterval: time.Minute}
	got := w.cfg
	if got.BatchSize != want.BatchSize || got.Concurrency != want.Concurrency || got.PollInterval != want.PollInterval ||
		got.StaleAfter != want.StaleAfter || got.ShutdownTimeout != want.ShutdownTimeout || got.ReclaimInterval != want.ReclaimInterval ||
		got.Logger == nil || got.Reporter == nil || got.Observer == nil {
		t.Errorf("defaults = %+v, want %+v with Logger, Reporter, Observer set", got, want)
	}

	noParse, err := sql.Open("mysql", strings.Replace(db.DSN, "parseTime=true", "parseTime=false", 1))
	if err != nil {
		t.Fatal(err)
	}
	defer noParse.Close()
	if _, err := NewWorker(noParse, r, Config{}); err == nil || !strings.Contains(err.Error(), "parseTime=true") {
		t.Errorf("DSN without parseTime: err = %v", err)
	}
	local, err := sql.Open("mysql", db.DSN+"&loc=Local")
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	// loc=Local is accepted where the local zone is UTC at every instant, refused naming
	// loc=UTC elsewhere (TestDSNLocLocalFollowsTZ runs both).
	if _, err := NewWorker(local, r, Config{}); checkZone(time.Local, time.Now()) == nil && err != nil ||
		checkZone(time.Local, time.Now()) != nil && (err == nil || !strings.Contains(err.Error(), "loc=UTC")) {
		t.Errorf("DSN with loc=Local (local zone %s): err = %v", time.Local, err)
	}
	// Run twice at once is refused.
	w2 := newTestWorker(t, db.DB, r, Config{})
	stop := start(t, w2)
	testutil.Eventually(t, 5*time.Second, "Run started", w2.running.Load)
	if err := w2.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "already running") {
		t.Errorf("second Run: %v, want already running", err)
	}
	stop()
}

// A policy that would panic or misbehave at run time is refused by NewWorker, naming the event
// and the field (Backoff{Max: math.MaxInt64} used to panic in the jitter, outside any recover).
func TestNewWorkerRefusesBadPolicies(t *testing.T) {
	t.Parallel()
	d := migrated(t)
	h := func(context.Context, json.RawMessage, Delivery) error { return nil }
	for _, c := range []struct {
		p    Policy
		want string
	}{
		{Policy{Backoff: Backoff{Max: math.MaxInt64}}, `event "e": policy: Backoff.Max 2562047h47m16.854775807s is over 876000h0m0s`},
		{Policy{MaxAttempts: -1}, `event "e": policy: MaxAttempts -1 is not in 1..2147483647`},
		{Policy{MaxAttempts: math.MaxInt32 + 1}, `MaxAttempts 2147483648 is not in 1..2147483647`},
		{Policy{Timeout: -time.Second}, `Timeout -1s is not positive`},
		{Policy{Backoff: Backoff{Initial: -time.Second}}, `Backoff.Initial -1s is not positive`},
		{Policy{Backoff: Backoff{Max: -time.Second}}, `Backoff.Max -1s is negative`},
	} {
		r := NewRouter()
		r.Handle("e", c.p, h)
		_, err := NewWorker(d.DB, r, Config{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewWorker with %+v: err = %v, want it to contain %q", c.p, err, c.want)
		}
	}
}

// The worker owns a copy of the routes: registering on the router after NewWorker does not race
// with dispatch (go test -race) and does not change what the worker serves.
func TestRouterHandleAfterNewWorker(t *testing.T) {
	t.Parallel()
	d := migrated(t)
	var handled atomic.Int64
	r := NewRouter()
	r.Handle("first", Policy{}, func(context.Context, json.RawMessage, Delivery) error { handled.Add(1); return nil })
	w := newTestWorker(t, d.DB, r, fastConfig(Config{}))
	stop := start(t, w)
	defer stop()
	enqueueN(t, d.DB, "first", 50)
	for i := range 50 {
		r.Handle("late_"+itoa(i), Policy{}, func(context.Context, json.RawMessage, Delivery) error { return nil })
	}
	enqueueN(t, d.DB, "late_0", 1)
	testutil.Eventually(t, 10*time.Second, "50 messages handled", func() bool { return handled.Load() == 50 })
	stop()
	if n := countRows(t, d, "event_type = 'late_0' AND status = 'PENDING'"); n != 1 {
		t.Errorf("late_0 rows PENDING = %d, want 1 (registered after NewWorker: not this worker's)", n)
	}
}
