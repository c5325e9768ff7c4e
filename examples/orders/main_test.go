package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/examples/events"
	"github.com/outboxgen/outboxgen/runtime/outbox"
	"github.com/outboxgen/outboxgen/runtime/outboxtest"
)

// TestOrders runs the example on a real server and checks, from the database, what it claims:
// every order's events were handled in the order its transactions committed, one at a time,
// each exactly once, with its order's key; the declined payment left nothing; and the CRM
// timeout held its own order's later events, not the other orders'.
func TestOrders(t *testing.T) {
	// run is the program itself, its two workers included: handling while the orders race is the point.
	db := outboxtest.Open(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	var out bytes.Buffer
	if err := run(ctx, db, &out); err != nil {
		t.Fatalf("run: %v\noutput:\n%s", err, out.String())
	}
	t.Logf("output:\n%s", out.String())

	// query runs q and calls each after scanning every row into dest.
	query := func(q string, dest []any, each func()) {
		t.Helper()
		rows, err := db.Query(q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		defer rows.Close()
		for rows.Next() {
			if err := rows.Scan(dest...); err != nil {
				t.Fatal(err)
			}
			each()
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	}

	// The commit order of each order: placed, then paid and shipped in the order they won the
	// order's row lock. Versions run 1, 2, 3 without a gap: the declined payment's rollback
	// took its version back.
	committed := map[int64][]string{}
	emails := map[int64]string{}
	var id int64
	var version int
	var eventType, email string
	query("SELECT h.order_id, h.version, h.event_type, o.customer_email FROM order_history h JOIN orders o ON o.id = h.order_id ORDER BY h.order_id, h.version",
		[]any{&id, &version, &eventType, &email}, func() {
			if version != len(committed[id])+1 {
				t.Errorf("order %d: version %d after %d changes; want no gap", id, version, len(committed[id]))
			}
			committed[id] = append(committed[id], eventType)
			emails[id] = email
		})
	if len(committed) != len(customers) {
		t.Fatalf("%d orders committed, want %d: %v", len(committed), len(customers), committed)
	}
	for id, c := range committed {
		if len(c) != 3 || c[0] != "order_placed" || !(c[1] == "order_paid" && c[2] == "order_shipped" || c[1] == "order_shipped" && c[2] == "order_paid") {
			t.Errorf("order %d committed %v; want order_placed, then order_paid and order_shipped in either order", id, c)
		}
	}

	// The handler calls of each order, in the order they were recorded.
	type call struct {
		eventType, key, outcome string
		messageID               int64
		attempt                 int
		started, finished       time.Time
	}
	calls := map[int64][]call{}
	var all []call
	var c call
	query("SELECT order_id, event_type, ordering_key, outcome, message_id, attempt, started_at, finished_at FROM order_handled ORDER BY id",
		[]any{&id, &c.eventType, &c.key, &c.outcome, &c.messageID, &c.attempt, &c.started, &c.finished}, func() {
			calls[id] = append(calls[id], c)
			all = append(all, c)
		})

	for id, want := range committed {
		var handled []string
		key := fmt.Sprintf("orders:%d:%d", len(fmt.Sprint(id)), id)
		for i, c := range calls[id] {
			if c.outcome == "ok" {
				handled = append(handled, c.eventType)
			}
			if c.key != key {
				t.Errorf("order %d: %s was delivered with ordering key %q, want %q", id, c.eventType, c.key, key)
			}
			// One at a time: each call of the order started after the previous one ended.
			if i > 0 && c.started.Before(calls[id][i-1].finished) {
				t.Errorf("order %d: %s started at %s, before %s ended at %s", id, c.eventType, c.started.Format(time.StampMicro), calls[id][i-1].eventType, calls[id][i-1].finished.Format(time.StampMicro))
			}
		}
		if strings.Join(handled, ",") != strings.Join(want, ",") {
			t.Errorf("order %d: handled %v, want the commit order %v", id, handled, want)
		}
	}

	// The CRM timeout: one failed call, then the retry; the order's other events after it, and
	// other orders' events handled while it waited.
	var bob int64
	for id, e := range emails {
		if e == crmTimeoutFor {
			bob = id
		}
	}
	bc := calls[bob]
	if len(bc) != 4 || bc[0].eventType != "order_placed" || bc[0].outcome != "failed" || bc[1].eventType != "order_placed" || bc[1].outcome != "ok" || bc[1].attempt != 2 {
		t.Fatalf("order %d (%s): calls %+v; want order_placed failed, then its retry (attempt 2), then the other two", bob, crmTimeoutFor, bc)
	}
	others := 0
	for _, c := range all {
		if c.key != bc[0].key && c.finished.After(bc[0].finished) && c.finished.Before(bc[1].started) {
			others++
		}
	}
	if others == 0 {
		t.Errorf("no other order's event was handled while order %d's key was held: keys must not hold each other", bob)
	}

	// Every message SENT, once per committed change; the declined payment's message is gone.
	// Stats counts every message that is not SENT. order_shipped is delete_when_sent: its
	// rows went when they were delivered.
	placed := outboxtest.Enqueued[events.OrderPlaced](t, db)
	paid := outboxtest.Enqueued[events.OrderPaid](t, db)
	shipped := outboxtest.Enqueued[events.OrderShipped](t, db)
	s, err := outbox.Stats(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if msgs := len(placed) + len(paid); msgs != 2*len(customers) || len(shipped) != 0 || s.Pending+s.Processing+s.Failed != 0 {
		t.Errorf("%d placed and paid messages, %d shipped, %d pending, %d processing, %d failed; want %d, all SENT, and no shipped row",
			msgs, len(shipped), s.Pending, s.Processing, s.Failed, 2*len(customers))
	}
	var dan int64
	for id, e := range emails {
		if e == declinedFor {
			dan = id
		}
	}
	var payments []string
	for _, p := range paid {
		if p.OrderID == dan {
			payments = append(payments, p.PaymentID)
		}
	}
	if want := fmt.Sprintf("pay-%d-2", dan); len(payments) != 1 || payments[0] != want {
		t.Errorf("order %d's order_paid messages: %v; want only the retried payment %s (the declined one rolled back with its message)", dan, payments, want)
	}
	for _, want := range []string{"declined after its order_paid was enqueued: rolled back", "crm: timeout", "every order's events were handled one at a time, in the order their transactions committed (6 orders)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
}
