package events_test

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/outboxgen/outboxgen/examples/events"
	"github.com/outboxgen/outboxgen/runtime/outboxtest"
)

// The generated EnqueueManyX checks every payload before the transaction is used, naming the
// bad one by its index; valid payloads come back from the table in input order, their ids too.
func TestEnqueueManyValidatesEachAndKeepsOrder(t *testing.T) {
	ctx := context.Background()
	good := func(i int) events.OrderPlaced {
		return events.OrderPlaced{OrderID: int64(100 + i), CustomerEmail: "a@example.com", Total: events.Money{Amount: int64(i), Currency: events.MoneyCurrencyEUR}}
	}
	es := []events.OrderPlaced{good(0), good(1), good(2)}
	es[2].CustomerEmail = "\xff"
	// A nil DBTX: the check must fail first, so the transaction is never used.
	if _, err := events.EnqueueManyOrderPlaced(ctx, nil, es); err == nil || !strings.Contains(err.Error(), "es[2]: order_placed: customer_email is not valid UTF-8") {
		t.Fatalf("EnqueueManyOrderPlaced with es[2] invalid: %v", err)
	}

	db := outboxtest.Open(t)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	es = nil
	for i := range 700 {
		es = append(es, good(i))
	}
	ids, err := events.EnqueueManyOrderPlaced(ctx, tx, es)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(ids); i++ {
		if ids[i] <= ids[i-1] {
			t.Fatalf("ids[%d] = %d after %d", i, ids[i], ids[i-1])
		}
	}
	if got := outboxtest.Enqueued[events.OrderPlaced](t, tx); !reflect.DeepEqual(got, es) {
		t.Errorf("enqueued %d payloads, not the %d given in order", len(got), len(es))
	}
}
