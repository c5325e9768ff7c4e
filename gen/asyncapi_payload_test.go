package gen

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"gopkg.in/yaml.v3"
)

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
