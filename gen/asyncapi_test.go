package gen

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"gopkg.in/yaml.v3"
)

// The AsyncAPI document of every success golden is itself a golden, under testdata/asyncapi,
// rewritten with go test ./gen -update.

func asyncAPIGoldenPath(c *goldenCase) string {
	return filepath.Join("testdata", "asyncapi", strings.TrimSuffix(filepath.Base(c.path), ".txt")+".yaml")
}

// okGoldens returns the golden cases whose catalog is valid, with their model.
func okGoldens(t *testing.T) map[*goldenCase]*file {
	t.Helper()
	out := map[*goldenCase]*file{}
	for _, c := range loadGoldens(t) {
		if m, err := parse("events.yaml", []byte(c.sections[0].body)); err == nil {
			out[c] = m
		}
	}
	if len(out) < 10 {
		t.Fatalf("found %d valid golden catalogs, want at least 10", len(out))
	}
	return out
}

// TestAsyncAPIGolden checks the document of every valid golden catalog byte for byte, and that
// an invalid catalog gets the errors generate gives it.
func TestAsyncAPIGolden(t *testing.T) {
	for _, c := range loadGoldens(t) {
		t.Run(strings.TrimSuffix(filepath.Base(c.path), ".txt"), func(t *testing.T) {
			src := []byte(c.sections[0].body)
			doc, err := AsyncAPI("events.yaml", src, DefaultAddressPrefix)
			if _, genErr := Generate("events.yaml", src); genErr != nil {
				if err == nil || err.Error() != genErr.Error() {
					t.Fatalf("AsyncAPI of an invalid catalog: %v; want generate's errors:\n%v", err, genErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			again, _ := AsyncAPI("events.yaml", src, DefaultAddressPrefix)
			if !bytes.Equal(doc, again) {
				t.Fatal("two runs gave different documents")
			}
			p := asyncAPIGoldenPath(c)
			if *update {
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, doc, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(p)
			if err != nil {
				t.Fatalf("%v (run go test ./gen -update)", err)
			}
			if string(want) != string(doc) {
				t.Errorf("%s differs (run go test ./gen -update and review):\n%s", p, unifiedDiff(p, string(want), string(doc)))
			}
		})
	}
}

// TestAsyncAPIStructure parses each document and checks the AsyncAPI 3.0 shape: the root
// keys, one channel, send operation and message per outbox event with the references between
// them, payloads that require the non-optional fields and allow unknown ones, the types
// that payloads use under components/schemas, and that every $ref resolves.
func TestAsyncAPIStructure(t *testing.T) {
	for c, m := range okGoldens(t) {
		t.Run(strings.TrimSuffix(filepath.Base(c.path), ".txt"), func(t *testing.T) {
			docBytes, err := emitAsyncAPI(m, "events.yaml", DefaultAddressPrefix)
			if err != nil {
				t.Fatal(err)
			}
			var node yaml.Node
			if err := yaml.Unmarshal(docBytes, &node); err != nil {
				t.Fatalf("the document does not parse as YAML: %v", err)
			}
			if got := mapKeys(node.Content[0]); !reflect.DeepEqual(got, []string{"asyncapi", "info", "defaultContentType", "channels", "operations", "components"}) {
				t.Errorf("root keys %v", got)
			}
			var doc map[string]any
			if err := yaml.Unmarshal(docBytes, &doc); err != nil {
				t.Fatal(err)
			}
			if doc["asyncapi"] != "3.0.0" {
				t.Errorf("asyncapi: %#v, want the string 3.0.0", doc["asyncapi"])
			}
			info := asMap(t, doc["info"], "info")
			for _, k := range []string{"title", "version", "description"} {
				if s, ok := info[k].(string); !ok || s == "" {
					t.Errorf("info.%s: %#v, want a string", k, info[k])
				}
			}
			channels := asMap(t, doc["channels"], "channels")
			operations := asMap(t, doc["operations"], "operations")
			components := asMap(t, doc["components"], "components")
			messages := asMap(t, components["messages"], "components.messages")
			events := m.outboxEvents()
			if len(channels) != len(events) || len(operations) != len(events) || len(messages) != len(events) {
				t.Errorf("%d channels, %d operations, %d messages for %d outbox events", len(channels), len(operations), len(messages), len(events))
			}
			for _, e := range events {
				ch := asMap(t, channels[e.wire], "channel "+e.wire)
				if ch["address"] != DefaultAddressPrefix+e.wire {
					t.Errorf("channel %s: address %#v, want the relays' prefix and the wire name", e.wire, ch["address"])
				}
				chMsgs := asMap(t, ch["messages"], "channel messages")
				if !reflect.DeepEqual(chMsgs, map[string]any{e.wire: map[string]any{"$ref": "#/components/messages/" + e.wire}}) {
					t.Errorf("channel %s: messages %#v", e.wire, chMsgs)
				}
				op := asMap(t, operations["Enqueue"+e.goName], "operation Enqueue"+e.goName)
				if op["action"] != "send" || !reflect.DeepEqual(op["channel"], map[string]any{"$ref": "#/channels/" + e.wire}) ||
					!reflect.DeepEqual(op["messages"], []any{map[string]any{"$ref": "#/channels/" + e.wire + "/messages/" + e.wire}}) {
					t.Errorf("operation Enqueue%s: %#v", e.goName, op)
				}
				msg := asMap(t, messages[e.wire], "message "+e.wire)
				if msg["name"] != e.wire || msg["contentType"] != "application/json" {
					t.Errorf("message %s: name %#v, contentType %#v", e.wire, msg["name"], msg["contentType"])
				}
				headers := asMap(t, msg["headers"], "headers")
				hp := asMap(t, headers["properties"], "header properties")
				if headers["type"] != "object" || hp["outbox-idempotency-key"] == nil || hp["Nats-Msg-Id"] == nil || hp["traceparent"] == nil {
					t.Errorf("message %s: headers %#v", e.wire, headers)
				}
				payload := asMap(t, msg["payload"], "payload")
				if payload["type"] != "object" || payload["additionalProperties"] != true {
					t.Errorf("payload of %s: type %#v, additionalProperties %#v; want an object allowing unknown members", e.wire, payload["type"], payload["additionalProperties"])
				}
				var props, required []string
				for _, fl := range e.fields {
					props = append(props, fl.wire)
					if !fl.optional {
						required = append(required, fl.wire)
					}
				}
				payloadNode := find(node.Content[0], "components", "messages", e.wire, "payload")
				if got := mapKeys(find(payloadNode, "properties")); !reflect.DeepEqual(got, props) {
					t.Errorf("payload of %s: properties %v, want the fields in catalog order %v", e.wire, got, props)
				}
				var gotReq []string
				for _, r := range asList(payload["required"]) {
					gotReq = append(gotReq, r.(string))
				}
				if !reflect.DeepEqual(gotReq, required) {
					t.Errorf("payload of %s: required %v, want the fields that are not optional %v", e.wire, gotReq, required)
				}
			}
			d := &asyncDoc{m: m, shared: map[*namedType]bool{}}
			for _, e := range events {
				for _, fl := range e.fields {
					d.reach(fl.t)
				}
			}
			var want []string
			for _, nt := range m.types {
				if d.shared[nt] {
					want = append(want, nt.wire)
				}
			}
			if got := mapKeys(find(node.Content[0], "components", "schemas")); !reflect.DeepEqual(got, want) {
				t.Errorf("components.schemas %v, want the types outbox payloads use %v", got, want)
			}
			checkRefs(t, doc, doc)
		})
	}
}

func mapKeys(n *yaml.Node) []string {
	var out []string
	if n == nil {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		out = append(out, n.Content[i].Value)
	}
	return out
}

// find walks a yaml.Node mapping by keys.
func find(n *yaml.Node, keys ...string) *yaml.Node {
	for _, k := range keys {
		var next *yaml.Node
		for i := 0; n != nil && i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == k {
				next = n.Content[i+1]
			}
		}
		n = next
	}
	return n
}

func asMap(t *testing.T, v any, what string) map[string]any {
	t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%s: %#v, want a mapping", what, v)
	}
	return m
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

// checkRefs reports every $ref under v that does not point at a node of doc.
func checkRefs(t *testing.T, doc map[string]any, v any) {
	t.Helper()
	switch v := v.(type) {
	case map[string]any:
		if ref, ok := v["$ref"].(string); ok {
			var cur any = doc
			for _, tok := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
				m, ok := cur.(map[string]any)
				if !ok || m[tok] == nil {
					t.Errorf("$ref %q does not resolve", ref)
					return
				}
				cur = m[tok]
			}
		}
		for _, x := range v {
			checkRefs(t, doc, x)
		}
	case []any:
		for _, x := range v {
			checkRefs(t, doc, x)
		}
	}
}

// payloadSchemas compiles each outbox event's payload schema in the document (YAML) with a
// JSON Schema validator, draft 07 as AsyncAPI's schema format is, asserting formats
// (date-time) and content encodings (base64).
func payloadSchemas(t *testing.T, docYAML []byte, events []*event) map[string]*jsonschema.Schema {
	t.Helper()
	var doc any
	if err := yaml.Unmarshal(docYAML, &doc); err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(js))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft7)
	c.AssertFormat()
	c.AssertContent()
	const url = "file:///asyncapi.json"
	if err := c.AddResource(url, inst); err != nil {
		t.Fatal(err)
	}
	out := map[string]*jsonschema.Schema{}
	for _, e := range events {
		s, err := c.Compile(url + "#/components/messages/" + e.wire + "/payload")
		if err != nil {
			t.Fatalf("the payload schema of %s does not compile: %v", e.wire, err)
		}
		out[e.wire] = s
	}
	return out
}

func validateJSON(s *jsonschema.Schema, raw []byte) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return err
	}
	return s.Validate(v)
}

// TestAsyncAPIPayloads validates payloads made from each golden catalog's model against the
// schemas of its document: the full, minimal and empty payloads (what EnqueueX writes) are
// valid; each broken one (a field missing, null where Enqueue never writes null, a wrong JSON
// type, an integer out of its type's range or with a fraction, a time that is not UTC RFC
// 3339 with trimmed nanoseconds, bytes that are not base64, an enum value outside the list,
// inside structs, lists and maps too) is not. TestGeneratedCodeBuilds runs the same payloads
// through the generated decoders.
func TestAsyncAPIPayloads(t *testing.T) {
	var valid, broken int
	for c, m := range okGoldens(t) {
		t.Run(strings.TrimSuffix(filepath.Base(c.path), ".txt"), func(t *testing.T) {
			doc, err := emitAsyncAPI(m, "events.yaml", DefaultAddressPrefix)
			if err != nil {
				t.Fatal(err)
			}
			schemas := payloadSchemas(t, doc, m.outboxEvents())
			for _, e := range m.outboxEvents() {
				for _, p := range payloadInstances(t, e) {
					err := validateJSON(schemas[e.wire], p.json(t))
					switch {
					case p.valid && err != nil:
						t.Errorf("%s %s: a payload Enqueue writes is invalid: %v\n%s", e.wire, p.name, err, p.json(t))
					case !p.valid && err == nil:
						t.Errorf("%s %s: a broken payload is valid:\n%s", e.wire, p.name, p.json(t))
					case p.valid:
						valid++
					default:
						broken++
					}
				}
			}
		})
	}
	t.Logf("%d valid and %d broken payloads checked", valid, broken)
	if valid == 0 || broken < 100 {
		t.Errorf("only %d valid and %d broken payloads were made", valid, broken)
	}
}

// TestAsyncAPIGoldenWirePayload validates the payload TestGeneratedCodeBuilds sees the
// generated ok_wire_formats code write (wireGolden) against its schema.
func TestAsyncAPIGoldenWirePayload(t *testing.T) {
	for c, m := range okGoldens(t) {
		if !strings.HasSuffix(c.path, "ok_wire_formats.txt") {
			continue
		}
		doc, err := emitAsyncAPI(m, "events.yaml", DefaultAddressPrefix)
		if err != nil {
			t.Fatal(err)
		}
		s := payloadSchemas(t, doc, m.outboxEvents())["wire_check"]
		if err := validateJSON(s, []byte(wireGolden)); err != nil {
			t.Fatalf("the golden wire_check payload is invalid: %v", err)
		}
		return
	}
	t.Fatal("no ok_wire_formats golden")
}

// TestAsyncAPIOfficialSchema validates every golden document against the AsyncAPI 3.0.0 JSON
// Schema (github.com/asyncapi/spec-json-schemas, schemas/3.0.0-without-$id.json) when
// OUTBOX_ASYNCAPI_SCHEMA names a copy of it; the repository does not ship that file.
func TestAsyncAPIOfficialSchema(t *testing.T) {
	p := os.Getenv("OUTBOX_ASYNCAPI_SCHEMA")
	if p == "" {
		t.Skip("OUTBOX_ASYNCAPI_SCHEMA is not set (a copy of the AsyncAPI 3.0.0 JSON Schema)")
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	spec, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("file:///asyncapi-3.0.0.json", spec); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("file:///asyncapi-3.0.0.json")
	if err != nil {
		t.Fatal(err)
	}
	for cs, m := range okGoldens(t) {
		doc, err := emitAsyncAPI(m, "events.yaml", DefaultAddressPrefix)
		if err != nil {
			t.Fatal(err)
		}
		var v any
		if err := yaml.Unmarshal(doc, &v); err != nil {
			t.Fatal(err)
		}
		js, _ := json.Marshal(v)
		if err := validateJSON(s, js); err != nil {
			var ve *jsonschema.ValidationError
			if errors.As(err, &ve) {
				err = fmt.Errorf("%v", ve.DetailedOutput())
			}
			t.Errorf("%s: not a valid AsyncAPI 3.0.0 document: %v", cs.path, err)
		}
	}
}

// TestAsyncAPIHeaders validates headers as the relays send them (runtime/outboxnats and
// runtime/outboxkafka: the message's own, then the outbox- metadata) against a message's
// headers schema, and headers the relays never send against it.
func TestAsyncAPIHeaders(t *testing.T) {
	m, err := parse("events.yaml", []byte("version: 1\npackage: p\nevents:\n  order_placed: {fields: {order_id: string}, idempotency_key: [order_id]}\n"))
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
	m, err := parse("events.yaml", []byte("version: 1\npackage: p\nevents:\n  order.paid: {fields: {order_id: string}, ordering_key: [order_id], ordering_group: shop.orders}\n  note_added: {fields: {text: string}}\n"))
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
	if err := c.AddResource("file:///asyncapi.json", inst); err != nil {
		t.Fatal(err)
	}
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
