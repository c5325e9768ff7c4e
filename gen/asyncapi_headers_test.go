package gen

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"gopkg.in/yaml.v3"
)

// TestAsyncAPIHeaders validates headers as the relays send them (runtime/outboxnats and
// runtime/outboxkafka: the message's own, then the outbox- metadata) against a message's
// headers schema, and headers the relays never send against it.
func TestAsyncAPIHeaders(t *testing.T) {
	c := asyncAPISchemas(t, "version: 1\npackage: p\nevents:\n  order_placed: {fields: {order_id: string}, idempotency_key: [order_id]}\n")
	s, err := c.Compile("file:///asyncapi.json#/components/messages/order_placed/headers")
	if err != nil {
		t.Fatal(err)
	}
	sent := func() map[string]any {
		return map[string]any{
			"tenant": "acme", "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "tracestate": "k=v",
			"outbox-message-id": "42", "outbox-event-type": "order_placed", "outbox-idempotency-key": "order_placed:3:o-1",
			"outbox-attempt": "1", "outbox-enqueued-at": "2026-03-01T00:30:00.123456Z", "Nats-Msg-Id": "order_placed:3:o-1",
		}
	}
	check := func(name string, h map[string]any, valid bool) {
		t.Helper()
		b, _ := json.Marshal(h)
		if err := validateJSON(s, b); (err == nil) != valid {
			t.Errorf("%s: valid=%v, want %v (%v): %s", name, err == nil, valid, err, b)
		}
	}
	check("as sent", sent(), true)
	withSource := sent()
	withSource["outbox-source"], withSource["Nats-Msg-Id"] = "eu-1:shard.07", "eu-1:shard.07/order_placed:3:o-1"
	check("as sent with WithSource", withSource, true)
	check("no metadata (WithMetadataPrefix(\"\"))", map[string]any{"tenant": "acme"}, true)
	for name, change := range map[string]func(h map[string]any){
		"another event type": func(h map[string]any) { h["outbox-event-type"] = "order_paid" },
		"attempt 0":          func(h map[string]any) { h["outbox-attempt"] = "0" },
		"enqueued-at local":  func(h map[string]any) { h["outbox-enqueued-at"] = "2026-03-01T09:30:00+09:00" },
		"a number":           func(h map[string]any) { h["tenant"] = 1 },
		"a space in a name":  func(h map[string]any) { h["my header"] = "x" },
		"a bad traceparent":  func(h map[string]any) { h["traceparent"] = "nope" },
		"a source with a /":  func(h map[string]any) { h["outbox-source"] = "eu/1" },
	} {
		h := sent()
		change(h)
		check(name, h, false)
	}
}

// TestAsyncAPIOrderingKeyHeader: an ordered event's headers schema describes the
// outbox-ordering-key header the relays send, with its group; an unordered event's does not.
func TestAsyncAPIOrderingKeyHeader(t *testing.T) {
	c := asyncAPISchemas(t, "version: 1\npackage: p\nevents:\n  order.paid: {fields: {order_id: string}, ordering_key: [order_id], ordering_group: shop.orders}\n  note_added: {fields: {text: string}}\n")
	s, err := c.Compile("file:///asyncapi.json#/components/messages/order.paid/headers/properties/outbox-ordering-key")
	if err != nil {
		t.Fatal(err)
	}
	for key, valid := range map[string]bool{
		"shop.orders:4:o-42":                             true,
		"shop.orders:5:a\nb:":                            true,
		"shop.orders:sha256:" + strings.Repeat("ab", 32): true,
		"shopXorders:4:o-42":                             false, // the group's dot is a dot
		"payments:4:o-42":                                false,
		"shop.orders:sha256:xyz":                         false,
		"shop.orders:" + strings.Repeat("1", 191):        false,
	} {
		b, _ := json.Marshal(key)
		if err := validateJSON(s, b); (err == nil) != valid {
			t.Errorf("%q: valid=%v, want %v (%v)", key, err == nil, valid, err)
		}
	}
	if _, err := c.Compile("file:///asyncapi.json#/components/messages/note_added/headers/properties/outbox-ordering-key"); err == nil {
		t.Error("an unordered event's headers list outbox-ordering-key")
	}
}

// asyncAPISchemas compiles schemas out of the AsyncAPI document of catalog, which the compiler
// holds as file:///asyncapi.json. Formats are asserted.
func asyncAPISchemas(t *testing.T, catalog string) *jsonschema.Compiler {
	t.Helper()
	m, err := parse("events.yaml", []byte(catalog))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := emitAsyncAPI(m, "events.yaml", DefaultAddressPrefix)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := yaml.Unmarshal(doc, &v); err != nil {
		t.Fatal(err)
	}
	js, _ := json.Marshal(v)
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(js))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft7)
	c.AssertFormat()
	if err := c.AddResource("file:///asyncapi.json", inst); err != nil {
		t.Fatal(err)
	}
	return c
}
