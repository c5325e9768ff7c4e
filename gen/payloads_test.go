package gen

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// payloadInstance is a payload of an outbox event made from the model, and what the event's
// JSON Schema (valid) and its generated decoder (decodes) must say of it. The valid ones are
// what EnqueueX writes; each broken one is the full instance with one thing changed.
type payloadInstance struct {
	name    string
	payload any // JSON: map[string]any, []any, string, json.Number, bool, nil
	valid   bool
	decodes bool
}

func (p payloadInstance) json(t *testing.T) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(p.payload)
	if err != nil {
		t.Fatalf("%s: %v", p.name, err)
	}
	return b
}

// goSamples are values of the {go:} types the golden catalogs name, as their MarshalJSON
// writes them: outboxgen cannot make one up. A new {go:} type in a golden needs one here.
var goSamples = map[string]any{
	"encoding/json.Number": json.Number("3.14"),
	"net/netip.Addr":       "192.0.2.1",
	"math/big.Int":         json.Number("123456789012345678901234567890"),
}

// variants of a valid payload: every value set and at its maximum; every optional field
// absent, every nullable value null and integers at their minimum; optional fields null,
// lists and maps empty and unknown members in every object.
const (
	full = iota
	minimal
	empty
)

var variantNames = []string{"full", "minimal", "empty"}

type instanceMaker struct {
	t *testing.T
}

// payloadInstances returns the valid payloads of e, then the broken ones.
func payloadInstances(t *testing.T, e *event) []payloadInstance {
	mk := &instanceMaker{t: t}
	var out []payloadInstance
	for v, name := range variantNames {
		out = append(out, payloadInstance{name: name, payload: mk.object(e.fields, v, 0), valid: true, decodes: true})
	}
	base := out[0].payload
	out = append(out,
		payloadInstance{name: "payload null", payload: nil},
		payloadInstance{name: "payload a list", payload: []any{}},
	)
	for _, fl := range e.fields {
		out = append(out, mk.broken(base, []any{fl.wire}, fl.t, true, fl.optional)...)
	}
	return out
}

// object is a struct's JSON in variant v at depth d (deeper than 1, a recursive type stops:
// its lists are null or empty and its optional fields absent).
func (mk *instanceMaker) object(fields []*field, v, d int) map[string]any {
	o := map[string]any{}
	if d > 1 && v == full {
		v = minimal
	}
	for _, fl := range fields {
		switch {
		case fl.optional && v == minimal:
			continue
		case fl.optional && v == empty:
			o[fl.wire] = nil
		default:
			o[fl.wire] = mk.value(fl.t, v, d)
		}
	}
	if v == empty {
		o["zz_added_later"] = []any{json.Number("1"), map[string]any{"x": nil}}
	}
	return o
}

func (mk *instanceMaker) value(t *goType, v, d int) any {
	switch t.kind {
	case kNamed:
		if t.named.enum {
			vals := t.named.values
			if v == full {
				return vals[0].wire
			}
			return vals[len(vals)-1].wire
		}
		return mk.object(t.named.fields, v, d+1)
	case kSlice:
		switch {
		case v == minimal || d > 1:
			return nil
		case v == empty:
			return []any{}
		}
		return []any{mk.value(t.elem, full, d+1), mk.value(t.elem, minimal, d+1)}
	case kMap:
		switch {
		case v == minimal || d > 1:
			return nil
		case v == empty:
			return map[string]any{}
		}
		return map[string]any{"a": mk.value(t.elem, full, d+1), "b\u00e9": mk.value(t.elem, minimal, d+1)}
	case kGo:
		s, ok := goSamples[t.path+"."+t.name]
		if !ok {
			mk.t.Fatalf("no sample JSON for {go: %s.%s}: add one to goSamples", t.path, t.name)
		}
		if v == minimal {
			return nil
		}
		return s
	}
	switch b := t.builtin; b {
	case "string":
		if v == minimal {
			return ""
		}
		return "text \u00e9 \"quoted\" \u2028"
	case "bool":
		return v == full
	case "float64":
		if v == minimal {
			return json.Number("-2.5e-300")
		}
		return json.Number("1.5")
	case "time":
		if v == full {
			return "2026-03-01T00:30:00.123456789Z"
		}
		return "0001-01-01T00:00:00Z"
	case "bytes":
		switch v {
		case minimal:
			return nil
		case empty:
			return ""
		}
		return "aGkA"
	case "json":
		switch v {
		case minimal:
			return nil
		case empty:
			return map[string]any{}
		}
		return map[string]any{"k": []any{json.Number("1"), "x", nil}}
	}
	r, ok := intRanges[t.builtin]
	if !ok {
		mk.t.Fatalf("no sample for type %s", t.builtin)
	}
	if v == full {
		return json.Number(r[1])
	}
	return json.Number(r[0])
}

// broken returns the mutations of the value at path in base (of type t; a field when field
// is set, else a list element or map value), and those of the values inside it.
func (mk *instanceMaker) broken(base any, path []any, t *goType, field, optional bool) []payloadInstance {
	at := pathText(path)
	var out []payloadInstance
	add := func(what string, decodes bool, change func(parent any, key any)) {
		p := deepCopy(base)
		parent := lookup(p, path[:len(path)-1])
		change(parent, path[len(path)-1])
		out = append(out, payloadInstance{name: at + ": " + what, payload: p, decodes: decodes})
	}
	set := func(x any) func(parent, key any) {
		return func(parent, key any) { setAt(parent, key, x) }
	}
	if field && !optional {
		add("missing", false, func(parent, key any) { delete(parent.(map[string]any), key.(string)) })
	}
	if !optional && !nullOnWire(t) {
		// The decoder checks fields, structs and enums for null; encoding/json leaves a null
		// string or number in a list or map as the zero value, which Enqueue never writes.
		add("null", !field && t.kind != kNamed, set(nil))
	}
	wrongType := map[typeKind]any{kSlice: map[string]any{}, kMap: []any{}}
	switch t.kind {
	case kNamed:
		if t.named.enum {
			add("not one of the values", false, set("not_a_value_of_the_enum"))
			add("a number", false, set(json.Number("1")))
			break
		}
		add("a list", false, set([]any{}))
		obj := lookup(base, path).(map[string]any)
		for _, fl := range t.named.fields {
			if _, ok := obj[fl.wire]; ok {
				out = append(out, mk.broken(base, append(append([]any(nil), path...), fl.wire), fl.t, true, fl.optional)...)
			}
		}
	case kSlice, kMap:
		add("wrong JSON type", false, set(wrongType[t.kind]))
		var first any = 0
		if t.kind == kMap {
			first = "a"
		}
		if lookup(base, path) != nil {
			out = append(out, mk.broken(base, append(append([]any(nil), path...), first), t.elem, false, false)...)
		}
	case kBuiltin:
		switch b := t.builtin; b {
		case "string":
			add("a number", false, set(json.Number("1")))
		case "bool":
			add("a string", false, set("true"))
		case "float64":
			add("a string", false, set("1.5"))
		case "time":
			add("a number", false, set(json.Number("1")))
			add("not a time", false, set("2026-03-01"))
			// encoding/json reads any RFC 3339 offset; Enqueue writes UTC and trims zeros.
			add("not UTC", true, set("2026-03-01T09:30:00+09:00"))
			add("trailing zeros", true, set("2026-03-01T00:30:00.500Z"))
		case "bytes":
			add("a number", false, set(json.Number("1")))
			add("not base64", false, set("not base64!"))
		case "json":
		default:
			r := intRanges[b]
			add("a string", false, set("1"))
			add("a fraction", false, set(json.Number("1.5")))
			add("over the maximum", false, set(json.Number(plusOne(r[1]))))
			add("under the minimum", false, set(json.Number("-"+plusOne(strings.TrimPrefix(r[0], "-")))))
		}
	}
	return out
}

// plusOne adds 1 to a decimal number of any size.
func plusOne(s string) string {
	b := []byte(s)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < '9' {
			b[i]++
			return string(b)
		}
		b[i] = '0'
	}
	return "1" + string(b)
}

func pathText(path []any) string {
	var b strings.Builder
	for i, p := range path {
		switch p := p.(type) {
		case int:
			fmt.Fprintf(&b, "[%d]", p)
		case string:
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(p)
		}
	}
	return b.String()
}

func deepCopy(v any) any {
	switch v := v.(type) {
	case map[string]any:
		c := make(map[string]any, len(v))
		for k, x := range v {
			c[k] = deepCopy(x)
		}
		return c
	case []any:
		c := make([]any, len(v))
		for i, x := range v {
			c[i] = deepCopy(x)
		}
		return c
	}
	return v
}

func lookup(v any, path []any) any {
	for _, p := range path {
		switch p := p.(type) {
		case int:
			v = v.([]any)[p]
		case string:
			v = v.(map[string]any)[p]
		}
	}
	return v
}

func setAt(parent, key, x any) {
	switch k := key.(type) {
	case int:
		parent.([]any)[k] = x
	case string:
		parent.(map[string]any)[k] = x
	}
}
