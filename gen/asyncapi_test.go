package gen

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

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
