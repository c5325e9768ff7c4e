package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/internal/faultdriver"
	"github.com/outboxgen/outboxgen/internal/testutil"
)

// NewWorkerContext runs every database check under its context: a cancelled context, or one
// that ends while a check waits on the server, makes it return at once with the context's error.
func TestNewWorkerContextHonoursItsContext(t *testing.T) {
	t.Parallel()
	_, inj, db := faultyDB(t)
	r := NewRouter()
	r.Handle("e", Policy{}, func(context.Context, json.RawMessage, Delivery) error { return nil })
	cfg := fastConfig(Config{})

	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := NewWorkerContext(cancelled, db, r, cfg); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: err %v, want context.Canceled", err)
	}

	// Each check in turn hangs on the server longer than NewWorker's own 10s bound.
	for _, check := range []struct{ name, match string }{
		{"clock", `AS now`},
		{"binlog", `binlog_format`},
		{"schema versions", `information_schema\.TABLES`},
		{"schema probe", `COUNT\(\*\) AS SIGNED\) AS n FROM outbox_messages`},
	} {
		h := inj.Add(faultdriver.Rule{Match: check.match, Delay: time.Minute, Passthrough: true})
		// The context ends once the check hangs on the server, whatever the checks before it
		// took on a loaded machine.
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() {
			_, err := NewWorkerContext(ctx, db, r, cfg)
			errc <- err
		}()
		testutil.Eventually(t, 30*time.Second, check.name+" hangs", func() bool { return h.Hits() == 1 })
		began := time.Now()
		cancel()
		var err error
		select {
		case err = <-errc:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s hangs: NewWorkerContext did not return within 30s of the cancel", check.name)
		}
		took := time.Since(began)
		h.Remove()
		if !errors.Is(err, context.Canceled) || took > 5*time.Second {
			t.Errorf("%s hangs: err %v %s after the cancel, want context.Canceled within 5s", check.name, err, took.Round(time.Millisecond))
		}
		if h.Hits() != 1 {
			t.Errorf("%s: the hanging rule answered %d statements, want 1", check.name, h.Hits())
		}
	}

	if _, err := NewWorkerContext(context.Background(), db, r, cfg); err != nil {
		t.Errorf("with no fault: %v", err)
	}
}
