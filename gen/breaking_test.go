package gen

import (
	"errors"
	"strings"
	"testing"
)

// breakingBase is the version every case of TestBreaking compares against, named old.yaml.
const breakingBase = `version: 1
package: shop
types:
  money:
    fields:
      amount: int64
      currency: {type: enum, values: [KRW, USD, EUR]}
  status: {type: enum, values: [open, shipped]}
events:
  order_placed:
    description: An order.
    fields:
      order_id: string
      qty: int32
      total: money
      status: status
      tags: "[]string"
      note: {type: string, optional: true}
      channel: {type: enum, values: [web, app]}
    idempotency_key: [order_id]
    max_attempts: 5
  order_shipped:
    fields: {order_id: string, ref: {go: encoding/json.Number}}
  ping:
    delivery: direct
    fields: {n: int}
`

// TestBreaking is the table of change kinds: each edit of breakingBase is reported at its
// place in the new catalog with the documented message, or passes.
func TestBreaking(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edits []string // old, new, old, new, ... applied to breakingBase, each exactly once
		want  []string // the report, without the "events.yaml:" prefix; none = safe
		added int      // outbox events only the new version has, for the safe cases
	}{
		// Safe.
		{name: "unchanged"},
		{name: "new event", edits: []string{"  ping:\n", "  order_cancelled:\n    fields: {order_id: string}\n  ping:\n"}, added: 1},
		{name: "new optional field", edits: []string{"      channel:", "      gift: {type: bool, optional: true}\n      channel:"}},
		{name: "new enum values", edits: []string{"[web, app]", "[web, app, kiosk]", "[open, shipped]", "[open, shipped, lost]"}},
		{name: "descriptions", edits: []string{"An order.", "An order, placed.", "  money:\n", "  money:\n    description: Minor units.\n"}},
		{name: "policies", edits: []string{"max_attempts: 5", "max_attempts: 9\n    backoff: {initial: 2s, max: 1m}\n    timeout: 30s"}},
		{name: "field order", edits: []string{"      order_id: string\n      qty: int32\n", "      qty: int32\n      order_id: string\n"}},
		{name: "widening", edits: []string{"qty: int32", "qty: int64", "amount: int64", "amount: int"}},
		{name: "int32 to float64", edits: []string{"qty: int32", "qty: float64"}},
		{name: "enums to string", edits: []string{"status: status", "status: string", "{type: enum, values: [web, app]}", "string"}},
		{name: "named enum to inline enum", edits: []string{"status: status", "status: {type: enum, values: [open, shipped]}"}},
		{name: "anything to json", edits: []string{`tags: "[]string"`, "tags: json", "total: money", "total: json"}},
		// The Go name is not on the wire: Go callers fail to compile, nothing stored changes.
		{name: "a field's Go name", edits: []string{"qty: int32", "qty: {type: int32, go_name: Quantity}", "amount: int64", "amount: {type: int64, go_name: Cents}"}},
		{name: "made optional", edits: []string{`tags: "[]string"`, `tags: {type: "[]string", optional: true}`}},
		{name: "type renamed, same fields", edits: []string{"  money:\n", "  amount_type:\n", "total: money", "total: amount_type"}},
		{name: "idempotency key added", edits: []string{"fields: {order_id: string, ref: {go: encoding/json.Number}}", "fields: {order_id: string, ref: {go: encoding/json.Number}}\n    idempotency_key: [order_id]"}},
		{name: "direct payload changed", edits: []string{"fields: {n: int}", "fields: {n: string, m: bool}"}},
		{name: "direct event removed", edits: []string{"  ping:\n    delivery: direct\n    fields: {n: int}\n", ""}},

		// Breaking.
		{name: "event removed", edits: []string{"  order_shipped:\n    fields: {order_id: string, ref: {go: encoding/json.Number}}\n", ""}, want: []string{
			`9:1: event "order_shipped" removed (line 22 of old.yaml): its pending rows are never claimed again (they stay PENDING), and its consumers stop receiving it; drain it first (outboxgen status shows none pending), or keep it`,
		}},
		{name: "wire name renamed", edits: []string{"  order_shipped:", "  order_sent:"}, added: 1, want: []string{
			`9:1: event "order_shipped" removed (line 22 of old.yaml): its pending rows are never claimed again (they stay PENDING), and its consumers stop receiving it; drain it first (outboxgen status shows none pending), or keep it`,
		}},
		{name: "outbox to direct", edits: []string{"  order_shipped:\n", "  order_shipped:\n    delivery: direct\n"}, want: []string{
			`23:15: event "order_shipped": delivery changed from outbox to direct: its pending rows are never claimed again, and relays and their consumers stop receiving it`,
		}},
		{name: "direct to outbox", edits: []string{"delivery: direct", "delivery: outbox"}, want: []string{
			`25:15: event "ping": delivery changed from direct to outbox: it is now stored and relayed, callers of SendPing must enqueue it in a transaction, and a worker must handle it`,
		}},
		{name: "optional field removed", edits: []string{"      note: {type: string, optional: true}\n", ""}, want: []string{
			`10:3: event "order_placed": field "note" removed (line 18 of old.yaml): consumers that read it get nothing from new rows`,
		}},
		{name: "required field removed", edits: []string{"      tags: \"[]string\"\n", ""}, want: []string{
			`10:3: event "order_placed": field "tags" removed (line 17 of old.yaml): workers still on the old catalog refuse new rows without it, and consumers lose it`,
		}},
		{name: "field renamed", edits: []string{"      qty: int32", "      quantity: int32"}, want: []string{
			`10:3: event "order_placed": field "qty" removed (line 14 of old.yaml): workers still on the old catalog refuse new rows without it, and consumers lose it`,
			`14:7: event "order_placed": new field "quantity" is required: rows stored without it fail to decode (missing); declare it optional: true`,
		}},
		{name: "new required field", edits: []string{"      channel:", "      gift: bool\n      channel:"}, want: []string{
			`19:7: event "order_placed": new field "gift" is required: rows stored without it fail to decode (missing); declare it optional: true`,
		}},
		{name: "new required list field", edits: []string{"fields: {order_id: string,", "fields: {order_id: string, items: \"[]string\","}, want: []string{
			`23:32: event "order_shipped": new field "items" is required: rows stored without it fail to decode (missing); declare it optional: true`,
		}},
		{name: "made required", edits: []string{"note: {type: string, optional: true}", "note: string"}, want: []string{
			`18:7: event "order_placed": field "note" is no longer optional: stored rows where it is null, or that were written before it existed, fail to decode`,
		}},
		{name: "narrowed", edits: []string{"qty: int32", "qty: uint32"}, want: []string{
			`14:12: event "order_placed": field "qty": type changed from int32 to uint32 (line 14 of old.yaml): stored values may not decode as uint32`,
		}},
		{name: "int64 to float64", edits: []string{"amount: int64", "amount: float64"}, want: []string{
			`6:15: type "money": field "amount": type changed from int64 to float64 (line 6 of old.yaml): stored values may not decode as float64`,
		}},
		{name: "string to enum", edits: []string{"order_id: string\n      qty", "order_id: {type: enum, values: [a]}\n      qty"}, want: []string{
			`13:24: event "order_placed": field "order_id": type changed from string to enum (line 13 of old.yaml): stored values may not decode as enum`,
		}},
		{name: "list element narrowed", edits: []string{`tags: "[]string"`, `tags: "[]status"`}, want: []string{
			`17:13: event "order_placed": field "tags": type changed from []string to []status (line 17 of old.yaml): stored values may not decode as []status`,
		}},
		{name: "struct to string", edits: []string{"total: money", "total: string"}, want: []string{
			`15:14: event "order_placed": field "total": type changed from money to string (line 15 of old.yaml): stored values may not decode as string`,
		}},
		{name: "list to map", edits: []string{`tags: "[]string"`, `tags: "map[string]string"`}, want: []string{
			`17:13: event "order_placed": field "tags": type changed from []string to map[string]string (line 17 of old.yaml): stored values may not decode as map[string]string`,
		}},
		{name: "go type changed", edits: []string{"{go: encoding/json.Number}", "{go: math/big.Int}"}, want: []string{
			`23:42: event "order_shipped": field "ref": type changed from {go: encoding/json.Number} to {go: math/big.Int} (line 23 of old.yaml): stored values may not decode as {go: math/big.Int}`,
		}},
		{name: "enum value removed", edits: []string{"[open, shipped]", "[open]"}, want: []string{
			`8:3: type "status": enum value "shipped" removed (line 8 of old.yaml): stored rows that hold it fail to decode`,
		}},
		{name: "inline enum value removed", edits: []string{"[web, app]", "[web]"}, want: []string{
			`19:23: event "order_placed": field "channel": enum value "app" removed (line 19 of old.yaml): stored rows that hold it fail to decode`,
		}},
		{name: "nested enum value removed", edits: []string{"[KRW, USD, EUR]", "[KRW, USD]"}, want: []string{
			`7:24: type "money": field "currency": enum value "EUR" removed (line 7 of old.yaml): stored rows that hold it fail to decode`,
		}},
		{name: "nested field removed", edits: []string{"      currency: {type: enum, values: [KRW, USD, EUR]}\n", ""}, want: []string{
			`4:3: type "money": field "currency" removed (line 7 of old.yaml): workers still on the old catalog refuse new rows without it, and consumers lose it`,
		}},
		{name: "nested new required field", edits: []string{"      amount: int64\n", "      amount: int64\n      scale: int32\n"}, want: []string{
			`7:7: type "money": new field "scale" is required: rows stored without it fail to decode (missing); declare it optional: true`,
		}},
		{name: "idempotency key changed", edits: []string{"[order_id]", "[order_id, qty]"}, want: []string{
			`20:22: event "order_placed": idempotency_key changed from [order_id] to [order_id, qty] (line 20 of old.yaml): new messages of a logical event get another key than its pending ones, so outbox.Once and JetStream's duplicate window no longer match them`,
		}},
		{name: "idempotency key removed", edits: []string{"    idempotency_key: [order_id]\n", ""}, want: []string{
			`10:3: event "order_placed": idempotency_key [order_id] removed (line 20 of old.yaml): new messages get msg:<id> keys, so deduplication by key (outbox.Once, JetStream's Nats-Msg-Id) no longer recognises a logical event sent twice`,
		}},
		{name: "several, in file order", edits: []string{"[open, shipped]", "[open]", "qty: int32", "qty: uint32", "      note: {type: string, optional: true}\n", ""}, want: []string{
			`8:3: type "status": enum value "shipped" removed (line 8 of old.yaml): stored rows that hold it fail to decode`,
			`10:3: event "order_placed": field "note" removed (line 18 of old.yaml): consumers that read it get nothing from new rows`,
			`14:12: event "order_placed": field "qty": type changed from int32 to uint32 (line 14 of old.yaml): stored values may not decode as uint32`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := breakingBase
			for i := 0; i+1 < len(tc.edits); i += 2 {
				if strings.Count(src, tc.edits[i]) != 1 {
					t.Fatalf("edit %q does not match exactly once", tc.edits[i])
				}
				src = strings.Replace(src, tc.edits[i], tc.edits[i+1], 1)
			}
			rep, err := Breaking("events.yaml", []byte(src), "old.yaml", []byte(breakingBase))
			if err != nil {
				t.Fatalf("%v\n%s", err, src)
			}
			var got []string
			for _, c := range rep.Changes {
				got = append(got, strings.TrimPrefix(c.Error(), "events.yaml:"))
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Fatalf("got:\n%s\nwant:\n%s\nnew catalog:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"), src)
			}
			if len(tc.want) == 0 && (rep.Compared != 2 || rep.Added != tc.added) {
				t.Errorf("compared %d, added %d; want 2 and %d", rep.Compared, rep.Added, tc.added)
			}
		})
	}
}

// TestBreakingRecursiveAndShared: a type used by several payloads, and a type that holds
// itself, are compared once and reported once, at the type.
func TestBreakingRecursiveAndShared(t *testing.T) {
	old := "version: 1\npackage: tree\ntypes:\n  node:\n    fields:\n      name: string\n      kind: {type: enum, values: [leaf, branch]}\n      children: \"[]node\"\n      parent: {type: node, optional: true}\nevents:\n  a: {fields: {root: node}}\n  b: {fields: {nodes: \"map[string]node\"}}\n"
	src := strings.Replace(old, "[leaf, branch]", "[leaf]", 1)
	rep, err := Breaking("events.yaml", []byte(src), "old.yaml", []byte(old))
	if err != nil {
		t.Fatal(err)
	}
	if got := rep.Changes.Error(); got != `events.yaml:7:20: type "node": field "kind": enum value "branch" removed (line 7 of old.yaml): stored rows that hold it fail to decode` {
		t.Fatalf("got:\n%s", got)
	}
}

// TestBreakingInvalidCatalogs: an invalid new catalog gets check's errors; an invalid old
// one an AgainstError with its own name in each line.
func TestBreakingInvalidCatalogs(t *testing.T) {
	bad := strings.Replace(breakingBase, "qty: int32", "qty: int23", 1)
	_, err := Breaking("events.yaml", []byte(bad), "old.yaml", []byte(breakingBase))
	_, checkErr := Check("events.yaml", []byte(bad))
	if err == nil || checkErr == nil || err.Error() != checkErr.Error() {
		t.Errorf("an invalid new catalog: %v; want check's errors %v", err, checkErr)
	}
	_, err = Breaking("events.yaml", []byte(breakingBase), "origin/main:events.yaml", []byte(bad))
	var against *AgainstError
	if !errors.As(err, &against) || !strings.HasPrefix(err.Error(), `origin/main:events.yaml:14:12: event "order_placed": field "qty": unknown type "int23"`) {
		t.Errorf("an invalid old catalog: %T %v; want an AgainstError naming origin/main:events.yaml", err, err)
	}
}

// orderingBase is the version every case of TestBreakingOrdering compares against.
const orderingBase = `version: 1
package: shop
events:
  order_placed:
    fields: {order_id: string, customer: string}
    ordering_key: [order_id]
    ordering_group: orders
  order_paid:
    fields: {order_id: string, paid_at: time}
    ordering_key: [order_id]
    ordering_group: orders
  cart_updated:
    fields: {cart_id: int64, shopper: string}
    ordering_key: [cart_id, shopper]
  note_added:
    fields: {order_id: string}
`

// TestBreakingOrdering is the table of ordering changes: the keys of new messages must stay
// those of the pending messages of their aggregate, so that old and new are ordered together.
func TestBreakingOrdering(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edits []string // old, new, ... applied to orderingBase, each exactly once
		want  []string // the report, without the "events.yaml:" prefix; none = safe
		added int
	}{
		// Safe.
		{name: "unchanged"},
		{name: "default group written out", edits: []string{"    ordering_key: [cart_id, shopper]\n", "    ordering_key: [cart_id, shopper]\n    ordering_group: cart_updated\n"}},
		{name: "new event joins a group", edits: []string{"  note_added:\n", "  order_shipped:\n    fields: {order_id: string}\n    ordering_key: [order_id]\n    ordering_group: orders\n  note_added:\n"}, added: 1},
		{name: "new ordered event of its own", edits: []string{"  note_added:\n", "  cart_emptied:\n    fields: {cart_id: int64}\n    ordering_key: cart_id\n  note_added:\n"}, added: 1},
		{name: "one key field written as a scalar", edits: []string{"    ordering_key: [order_id]\n    ordering_group: orders\n  order_paid", "    ordering_key: order_id\n    ordering_group: orders\n  order_paid"}},
		{name: "events reordered", edits: []string{"  cart_updated:\n    fields: {cart_id: int64, shopper: string}\n    ordering_key: [cart_id, shopper]\n", "", "events:\n", "events:\n  cart_updated:\n    fields: {cart_id: int64, shopper: string}\n    ordering_key: [cart_id, shopper]\n"}},
		{name: "a non-key field added", edits: []string{"{order_id: string, customer: string}", "{order_id: string, customer: string, note: {type: string, optional: true}}"}},

		// Breaking.
		{name: "ordering key added", edits: []string{"    fields: {order_id: string}\n", "    fields: {order_id: string}\n    ordering_key: [order_id]\n    ordering_group: orders\n"}, want: []string{
			`17:19: event "note_added": ordering_key [order_id] added: the messages pending from before have no ordering key, so a new message of an aggregate can be handled before or beside an older one, and runtime/outboxkafka's record key becomes the ordering key (another partition than the aggregate's older records); drain the event first (outboxgen status shows none pending)`,
		}},
		{name: "ordering key removed", edits: []string{"    ordering_key: [cart_id, shopper]\n", ""}, want: []string{
			`12:3: event "cart_updated": ordering_key [cart_id, shopper] removed (line 14 of old.yaml): new messages are no longer handled one at a time in commit order, neither with each other nor with the pending messages of their key, and runtime/outboxkafka's record key becomes the idempotency key (another partition)`,
		}},
		{name: "ordering key and group removed", edits: []string{"    ordering_key: [order_id]\n    ordering_group: orders\n  order_paid", "  order_paid"}, want: []string{
			`4:3: event "order_placed": ordering_key [order_id] removed (line 6 of old.yaml): new messages are no longer handled one at a time in commit order, neither with each other nor with the pending messages of their key, and runtime/outboxkafka's record key becomes the idempotency key (another partition)`,
		}},
		{name: "ordering key field changed", edits: []string{"[cart_id, shopper]", "[cart_id]"}, want: []string{
			`14:19: event "cart_updated": ordering_key changed from [cart_id, shopper] to [cart_id] (line 14 of old.yaml): new messages get other keys than the pending ones of the same aggregate, so old and new messages are no longer ordered together, and their Kafka records (keyed by the ordering key) go to other partitions`,
		}},
		{name: "ordering key fields reordered", edits: []string{"[cart_id, shopper]", "[shopper, cart_id]"}, want: []string{
			`14:19: event "cart_updated": ordering_key changed from [cart_id, shopper] to [shopper, cart_id] (line 14 of old.yaml): new messages get other keys than the pending ones of the same aggregate, so old and new messages are no longer ordered together, and their Kafka records (keyed by the ordering key) go to other partitions`,
		}},
		{name: "group changed", edits: []string{"    ordering_group: orders\n  order_paid", "    ordering_group: placements\n  order_paid"}, want: []string{
			`7:21: event "order_placed": ordering group changed from "orders" to "placements" (line 7 of old.yaml): new messages get other keys than the pending ones of the same aggregate, so old and new messages are no longer ordered together, and their Kafka records (keyed by the ordering key) go to other partitions`,
		}},
		{name: "group removed, the default differs", edits: []string{"    ordering_group: orders\n  cart_updated", "  cart_updated"}, want: []string{
			`10:19: event "order_paid": ordering group changed from "orders" to "order_paid" (the default, its wire name) (line 11 of old.yaml): new messages get other keys than the pending ones of the same aggregate, so old and new messages are no longer ordered together, and their Kafka records (keyed by the ordering key) go to other partitions`,
		}},
		{name: "group set on a default", edits: []string{"    ordering_key: [cart_id, shopper]\n", "    ordering_key: [cart_id, shopper]\n    ordering_group: carts\n"}, want: []string{
			`15:21: event "cart_updated": ordering group changed from "cart_updated" (the default, its wire name) to "carts" (line 14 of old.yaml): new messages get other keys than the pending ones of the same aggregate, so old and new messages are no longer ordered together, and their Kafka records (keyed by the ordering key) go to other partitions`,
		}},
		{name: "key and group changed", edits: []string{"    ordering_key: [order_id]\n    ordering_group: orders\n  cart_updated", "    ordering_key: [paid_at]\n    ordering_group: payments\n  cart_updated"}, want: []string{
			`10:19: event "order_paid": ordering_key changed from [order_id] to [paid_at] (line 10 of old.yaml): new messages get other keys than the pending ones of the same aggregate, so old and new messages are no longer ordered together, and their Kafka records (keyed by the ordering key) go to other partitions`,
			`11:21: event "order_paid": ordering group changed from "orders" to "payments" (line 11 of old.yaml): new messages get other keys than the pending ones of the same aggregate, so old and new messages are no longer ordered together, and their Kafka records (keyed by the ordering key) go to other partitions`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := orderingBase
			for i := 0; i+1 < len(tc.edits); i += 2 {
				if strings.Count(src, tc.edits[i]) != 1 {
					t.Fatalf("edit %q does not match exactly once", tc.edits[i])
				}
				src = strings.Replace(src, tc.edits[i], tc.edits[i+1], 1)
			}
			rep, err := Breaking("events.yaml", []byte(src), "old.yaml", []byte(orderingBase))
			if err != nil {
				t.Fatalf("%v\n%s", err, src)
			}
			var got []string
			for _, c := range rep.Changes {
				got = append(got, strings.TrimPrefix(c.Error(), "events.yaml:"))
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Fatalf("got:\n%s\nwant:\n%s\nnew catalog:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"), src)
			}
			if len(tc.want) == 0 && (rep.Compared != 4 || rep.Added != tc.added) {
				t.Errorf("compared %d, added %d; want 4 and %d", rep.Compared, rep.Added, tc.added)
			}
		})
	}
}
