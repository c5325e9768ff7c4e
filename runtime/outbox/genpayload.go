package outbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// PayloadCheck collects what is wrong with a stored payload beyond what json.Unmarshal
// reports, for generated code.
//   - A field that is not optional may be missing or null. Generated Enqueue functions write
//     every field, and null only for nil pointers, lists, maps, bytes, json and {go:} values.
//   - An enum value may be one the catalog does not list.
//
// Each problem names its field by its path in the JSON, such as "lines[2].sku". Unknown fields
// are not problems. The zero value is ready to use.
type PayloadCheck struct {
	problems []string
}

// add records a problem of the value at path. The path "" is the payload itself.
func (c *PayloadCheck) add(path, problem string) {
	if path == "" {
		c.problems = append(c.problems, "the payload"+problem)
		return
	}
	c.problems = append(c.problems, fmt.Sprintf("field %q%s", path, problem))
}

// Err returns every problem as one error on one line, for last_error, or nil.
func (c *PayloadCheck) Err() error {
	if len(c.problems) == 0 {
		return nil
	}
	return errors.New("payload: " + strings.Join(c.problems, "; "))
}

// Object returns the JSON object raw, the value at path, and whether it is one. The path ""
// is the payload itself. null is a problem, since Enqueue never writes null for a struct.
func (c *PayloadCheck) Object(path string, raw json.RawMessage) (PayloadObject, bool) {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil {
		c.add(path, " is not a JSON object")
		return PayloadObject{}, false
	}
	if members == nil {
		c.add(path, " is null")
		return PayloadObject{}, false
	}
	return PayloadObject{c: c, at: path, members: members}, true
}

// Enum records the value raw at path unless it is a JSON string holding one of values.
func (c *PayloadCheck) Enum(path string, raw json.RawMessage, values ...string) {
	var v string
	switch {
	case string(raw) == "null":
		c.add(path, " is null")
	case json.Unmarshal(raw, &v) != nil:
		c.add(path, " is not a string")
	case !slices.Contains(values, v):
		c.add(path, fmt.Sprintf(": %q is not one of %s", v, strings.Join(values, ", ")))
	}
}

// PayloadObject is a JSON object of a stored payload, at a path, whose members a generated
// decoder checks. Problems go to the PayloadCheck that returned it.
type PayloadObject struct {
	c       *PayloadCheck
	at      string
	members map[string]json.RawMessage
}

// Path is the path of the member name. It is "name" in the payload itself, and "at.name"
// below it.
func (o PayloadObject) Path(name string) string {
	if o.at == "" {
		return name
	}
	return o.at + "." + name
}

// Required returns the member name, or nil after recording that it is missing or null.
func (o PayloadObject) Required(name string) json.RawMessage {
	raw, ok := o.members[name]
	switch {
	case !ok:
		o.c.add(o.Path(name), " is missing")
	case string(raw) == "null":
		o.c.add(o.Path(name), " is null")
	default:
		return raw
	}
	return nil
}

// Nullable returns the member name, or nil after recording that it is missing. It returns nil
// too when the member is null, for a nil list, map, []byte, json.RawMessage or {go:} value.
func (o PayloadObject) Nullable(name string) json.RawMessage {
	raw, ok := o.members[name]
	if !ok {
		o.c.add(o.Path(name), " is missing")
		return nil
	}
	if string(raw) == "null" {
		return nil
	}
	return raw
}

// Optional returns the member name, or nil when it is absent or null.
func (o PayloadObject) Optional(name string) json.RawMessage {
	raw := o.members[name]
	if string(raw) == "null" {
		return nil
	}
	return raw
}

// PayloadItem is an element of a list or map in a stored payload, with its path, for
// generated code.
type PayloadItem struct {
	Path string
	Raw  json.RawMessage
}

// PayloadList returns the elements of the JSON array raw, the value at path, with the paths
// path[0], path[1] and so on. null, or a value that is not an array, has none. The caller
// decoded the whole payload with json.Unmarshal already, which reports a wrong type.
func PayloadList(path string, raw json.RawMessage) []PayloadItem {
	var list []json.RawMessage
	_ = json.Unmarshal(raw, &list) // decoded once already, with the whole payload
	items := make([]PayloadItem, len(list))
	for i, x := range list {
		items[i] = PayloadItem{fmt.Sprintf("%s[%d]", path, i), x}
	}
	return items
}

// PayloadMap returns the members of the JSON object raw, the value at path, in key order. Each
// member's path is path[key]. null, or a value that is not an object, has none. The caller
// decoded the whole payload with json.Unmarshal already, which reports a wrong type.
func PayloadMap(path string, raw json.RawMessage) []PayloadItem {
	var m map[string]json.RawMessage
	_ = json.Unmarshal(raw, &m) // decoded once already, with the whole payload
	items := make([]PayloadItem, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		items = append(items, PayloadItem{path + "[" + k + "]", m[k]})
	}
	return items
}
