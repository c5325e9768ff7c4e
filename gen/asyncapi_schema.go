package gen

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

// Payload schemas are JSON Schema draft 07, the dialect of AsyncAPI's default schema format:
//
//	string, bool          string, boolean
//	int, int64, duration  integer, -2^63 .. 2^63-1 (duration: nanoseconds)
//	int32, uint32, uint64 integer within the type's range
//	float64               number
//	time                  string, date-time, UTC with nanoseconds trimmed (a pattern says so)
//	bytes                 string or null, contentEncoding base64
//	json, {go: T}         no constraint (any JSON value, null included)
//	enum                  string, enum: the values
//	[]T, map[string]T     array or null, object or null (nil is null on the wire)
//	a type from types:    $ref to components/schemas
//	optional: true        not required, and null allowed (a nil pointer is null)
//
// Every field that is not optional is required, as the generated decoder requires it.
// Objects allow unknown members (additionalProperties: true): consumers ignore them, so rows
// that a newer catalog wrote with a new optional field still validate.

// namedSchema is the schema of a type from types: under components/schemas.
func (d *asyncDoc) namedSchema(t *namedType) *yaml.Node {
	if t.enum {
		return d.typeSchema(&goType{kind: kNamed, named: t}, true).withDoc(t.doc).node()
	}
	return d.objectSchema(t.doc, t.fields)
}

// objectSchema is the schema of a payload or a struct: its fields as properties, the fields
// that are not optional required, unknown members allowed.
func (d *asyncDoc) objectSchema(doc string, fields []*field) *yaml.Node {
	o := ymap()
	if doc != "" {
		o.add("description", ytext(doc))
	}
	o.add("type", ystr("object"))
	props := ymap()
	var required []*yaml.Node
	for _, fl := range fields {
		s := d.typeSchema(fl.t, false)
		if fl.optional {
			s.nullable()
		} else {
			required = append(required, ystr(fl.wire))
		}
		props.add(fl.wire, s.withDoc(fl.doc).node())
	}
	if len(fields) > 0 {
		o.add("properties", props.node())
	}
	if len(required) > 0 {
		o.add("required", yseq(required...))
	}
	o.add("additionalProperties", ybool(true))
	return o.node()
}

// jsonSchema is one schema before rendering, so that optional: true can make it nullable
// and a field's description can join the note of its type.
type jsonSchema struct {
	note     string   // what the type means on the wire
	doc      string   // the catalog's description
	ref      string   // a $ref to components/schemas
	refNull  bool     // the $ref, or null
	types    []string // JSON types; none for any value
	format   string
	pattern  string
	encoding string // contentEncoding
	min, max string // integer bounds, as decimal text
	enum     []string
	enumNull bool
	items    *jsonSchema // of an array
	values   *jsonSchema // of an object used as a map
}

// Integer ranges of the catalog's integer types (int is 64 bits wide where the runtime runs).
var intRanges = map[string][2]string{
	"int":      {"-9223372036854775808", "9223372036854775807"},
	"int64":    {"-9223372036854775808", "9223372036854775807"},
	"duration": {"-9223372036854775808", "9223372036854775807"},
	"int32":    {"-2147483648", "2147483647"},
	"uint32":   {"0", "4294967295"},
	"uint64":   {"0", "18446744073709551615"},
}

// wireTimePattern is a time as the generated code writes it: time.RFC3339Nano after .UTC(),
// so Z, and a fraction only when it is not zero, without trailing zeros.
const wireTimePattern = `^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]*[1-9])?Z$`

// base64Pattern is encoding/json's []byte: standard base64 with padding.
const base64Pattern = `^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$`

const bigIntNote = "Can exceed 2^53, the largest integer a JavaScript number holds exactly."

// typeSchema is the schema of a value of t; top says t is the type being declared under
// components/schemas itself, not a use of it.
func (d *asyncDoc) typeSchema(t *goType, top bool) *jsonSchema {
	switch t.kind {
	case kNamed:
		if d.shared[t.named] && !top {
			return &jsonSchema{ref: "#/components/schemas/" + t.named.wire}
		}
		s := &jsonSchema{types: []string{"string"}}
		for _, v := range t.named.values {
			s.enum = append(s.enum, v.wire)
		}
		return s
	case kSlice:
		return &jsonSchema{types: []string{"array", "null"}, items: d.typeSchema(t.elem, false), note: "A list; null when nil."}
	case kMap:
		return &jsonSchema{types: []string{"object", "null"}, values: d.typeSchema(t.elem, false), note: "A map from string keys; null when nil."}
	case kGo:
		return &jsonSchema{note: fmt.Sprintf("The JSON of the Go type %s.%s, which outboxgen does not know: any value, null included.", t.path, t.name)}
	}
	switch b := t.builtin; b {
	case "string":
		return &jsonSchema{types: []string{"string"}}
	case "bool":
		return &jsonSchema{types: []string{"boolean"}}
	case "float64":
		return &jsonSchema{types: []string{"number"}, format: "double"}
	case "time":
		return &jsonSchema{types: []string{"string"}, format: "date-time", pattern: wireTimePattern,
			note: "UTC, RFC 3339 with nanoseconds and no trailing zeros (Go's time.RFC3339Nano)."}
	case "bytes":
		return &jsonSchema{types: []string{"string", "null"}, encoding: "base64", pattern: base64Pattern,
			note: "Bytes in standard base64 with padding; null when nil."}
	case "json":
		return &jsonSchema{note: "Any JSON value, as given (Go's json.RawMessage); null when nil."}
	case "int", "int32", "int64", "uint32", "uint64", "duration":
		r := intRanges[b]
		s := &jsonSchema{types: []string{"integer"}, format: b, min: r[0], max: r[1]}
		switch b {
		case "int":
			s.format = "int64"
		case "duration":
			s.format = "int64"
			s.note = "A duration in nanoseconds (Go's time.Duration). " + bigIntNote
		}
		if b == "int" || b == "int64" || b == "uint64" {
			s.note = bigIntNote
		}
		return s
	}
	panic("gen: no JSON Schema for type " + t.builtin) // validate admits only the types above
}

// nullable lets the value be null too.
func (s *jsonSchema) nullable() {
	switch {
	case s.ref != "":
		s.refNull = true
	case len(s.types) == 0: // any value already
	default:
		if s.types[len(s.types)-1] != "null" {
			s.types = append(s.types, "null")
		}
		if s.enum != nil {
			s.enumNull = true
		}
	}
}

func (s *jsonSchema) withDoc(doc string) *jsonSchema {
	s.doc = doc
	return s
}

func (s *jsonSchema) node() *yaml.Node {
	o := ymap()
	var desc []string
	for _, p := range []string{s.doc, s.note} {
		if p != "" {
			desc = append(desc, p)
		}
	}
	if len(desc) > 0 {
		o.add("description", ytext(strings.Join(desc, "\n\n")))
	}
	switch {
	case s.ref != "" && s.refNull:
		// draft 07 ignores keywords beside $ref, so the ref is wrapped.
		o.add("anyOf", yseq(yref(s.ref), ymap().add("type", ystr("null")).node()))
		return o.node()
	case s.ref != "" && len(desc) > 0:
		o.add("allOf", yseq(yref(s.ref)))
		return o.node()
	case s.ref != "":
		return yref(s.ref)
	}
	switch len(s.types) {
	case 0:
	case 1:
		o.add("type", ystr(s.types[0]))
	default:
		var ts []*yaml.Node
		for _, t := range s.types {
			ts = append(ts, ystr(t))
		}
		o.add("type", yflow(ts...))
	}
	if s.format != "" {
		o.add("format", ystr(s.format))
	}
	if s.pattern != "" {
		o.add("pattern", ystr(s.pattern))
	}
	if s.encoding != "" {
		o.add("contentEncoding", ystr(s.encoding))
	}
	if s.min != "" {
		o.add("minimum", yint(s.min))
		o.add("maximum", yint(s.max))
	}
	if s.enum != nil {
		var vs []*yaml.Node
		for _, v := range s.enum {
			vs = append(vs, ystr(v))
		}
		if s.enumNull {
			vs = append(vs, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"})
		}
		o.add("enum", yflow(vs...))
	}
	if s.items != nil {
		o.add("items", s.items.node())
	}
	if s.values != nil {
		o.add("additionalProperties", s.values.node())
	}
	return o.node()
}
