package outboxnats_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql" // runChild opens the parent's database
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxgen/outboxgen/runtime/outbox"
	"github.com/outboxgen/outboxgen/runtime/outboxnats"
	"github.com/outboxgen/outboxgen/runtime/outboxrelay/relaytest"
)

// childEnv makes this test binary a relay worker process for TestRelayWorkerKilledMidRelay
// instead of running tests.
const (
	childEnv         = "OUTBOXNATS_TEST_CHILD"
	childConcurrency = 8
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		os.Exit(runChild())
	}
	os.Exit(m.Run())
}

// runChild is a relay worker whose handler publishes, says so on stdout, and then never
// returns: every message it published stays PROCESSING until the parent kills the process.
func runChild() int {
	db, err := sql.Open("mysql", os.Getenv("CHILD_DSN"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	nc, err := nats.Connect(os.Getenv("CHILD_NATS"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	js, err := jetstream.New(nc)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	p := outboxnats.New(js)
	var mu sync.Mutex
	never := make(chan struct{})
	relay := outbox.NewRouter()
	relay.Handle("order_paid", outbox.Policy{Timeout: time.Second}, func(ctx context.Context, payload json.RawMessage, d outbox.Delivery) error {
		if err := p.Handle(ctx, payload, d); err != nil {
			return err
		}
		mu.Lock()
		fmt.Printf("published %d\n", d.MessageID)
		mu.Unlock()
		<-never // killed before it returns: no result is ever recorded
		return nil
	})
	w, err := outbox.NewWorker(db, relay, outbox.Config{
		Concurrency: childConcurrency, StaleAfter: 2 * time.Second, Logger: relaytest.QuietLogger(),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	if err := w.Run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
	}
	return 1
}
