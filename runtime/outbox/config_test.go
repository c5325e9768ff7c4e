package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"strings"
	"testing"
	"time"
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
	if time.Local != time.UTC {
		if _, err := NewWorker(local, r, Config{}); err == nil || !strings.Contains(err.Error(), "loc=UTC") {
			t.Errorf("DSN with loc=Local: err = %v", err)
		}
	}
	// Run twice at once is refused.
	w2 := newTestWorker(t, db.DB, r, Config{})
	stop := start(t, w2)
	waitFor(t, 5*time.Second, "Run started", w2.running.Load)
	if err := w2.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "already running") {
		t.Errorf("second Run: %v, want already running", err)
	}
	stop()
}
