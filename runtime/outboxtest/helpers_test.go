package outboxtest_test

import (
	"context"
	"database/sql"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/outboxgen/outboxgen/examples/events"
	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// fakeTB records what the kit reports instead of failing the test; Fatalf ends the goroutine
// as testing.T's does, so the kit's calls run in run's goroutine.
type fakeTB struct {
	testing.TB
	mu     sync.Mutex
	fatals []string
	errors []string
}

func (f *fakeTB) Errorf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errors = append(f.errors, fmt.Sprintf(format, args...))
}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.fatals = append(f.fatals, fmt.Sprintf(format, args...))
	f.mu.Unlock()
	runtime.Goexit()
}

func (f *fakeTB) Fatal(args ...any) { f.Fatalf("%s", fmt.Sprint(args...)) }
func (f *fakeTB) FailNow()          { f.Fatalf("FailNow") }

func (f *fakeTB) Failed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.fatals)+len(f.errors) > 0
}

// report is everything the kit reported, one line per call.
func (f *fakeTB) report() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(append(append([]string{}, f.fatals...), f.errors...), "\n")
}

// run calls fn with a fakeTB in a goroutine of its own and waits for it to return or Goexit.
func run(t *testing.T, fn func(tb testing.TB)) *fakeTB {
	t.Helper()
	f := &fakeTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	return f
}

// inTx runs fn in a transaction that commits, failing t on an error.
func inTx(t *testing.T, db *sql.DB, fn func(tx *sql.Tx) error) {
	t.Helper()
	if err := outbox.InTx(context.Background(), db, fn); err != nil {
		t.Fatal(err)
	}
}

func placed(id int64, email string, amount int64, cur events.MoneyCurrency) events.OrderPlaced {
	return events.OrderPlaced{OrderID: id, CustomerEmail: email, Total: events.Money{Amount: amount, Currency: cur}}
}
