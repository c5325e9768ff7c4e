package gen

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// This file is the first stage: events.yaml bytes -> catalog, a syntax tree that keeps the
// line and column of every node. It walks yaml.Node itself (KnownFields does not reach node
// walks), so unknown keys, wrong shapes and duplicate keys are reported here, all at once.

// pos is a place in the catalog, 1-based.
type pos struct{ line, col int }

func nodePos(n *yaml.Node) pos { return pos{n.Line, n.Column} }

// str is a scalar with its position.
type str struct {
	v string
	p pos
}

type catalog struct {
	root     pos
	version  *str // raw scalar, checked in validate
	pkg      *str
	output   *str
	defaults *policyDecl
	types    []*typeDecl
	events   []*eventDecl
	present  map[string]bool // top-level keys written, even with a value that was rejected
	eventsAt pos             // the events: key, where breaking reports a removed event
	accepts  []acceptDecl    // accept_breaking: (accept.go)
}

type policyDecl struct {
	p              pos
	maxAttempts    *str
	backoff        *str // position of the backoff key, when set
	backoffInitial *str
	backoffMax     *str
	timeout        *str
	// concurrency and rateLimit are events.yaml's concurrency: and rate_limit:, per event only.
	concurrency *str
	rateLimit   *str
}

type typeDecl struct {
	name        str
	description string
	isEnum      bool
	kind        *str // the "type:" scalar of an enum declaration
	values      []str
	valuesPos   *pos
	fields      []*fieldDecl
	fieldsPos   *pos
}

type eventDecl struct {
	name        str
	description string
	fields      []*fieldDecl
	fieldsPos   *pos
	key         []str
	keyPos      *pos
	// ordering_key and ordering_group (docs/ordering.md).
	orderingKey    []str
	orderingKeyPos *pos
	orderingGroup  *str
	policy         policyDecl
	delivery       *str
	// delete_when_sent (Policy.DeleteWhenSent), when set.
	deleteWhenSent *str
}

// fieldDecl is one field of an event or a struct type. Its type is either a type expression
// (typ: "int64", "[]money", "map[string]time", "enum"), or a {go: "path.Type"} reference.
type fieldDecl struct {
	name        str
	typ         *str
	goType      *str
	optional    bool
	description string
	values      []str // inline enum
	valuesPos   *pos
	// goName is go_name:, the field's Go name when the one derived from its name will not do
	// (sku -> SKU); the wire name stays the field's name.
	goName *str
}

// problems collects errors in the go build shape.
type problems struct {
	path  string
	dir   string // the catalog's directory, where {go:} key types are looked up
	lines int    // in the catalog, counted as yaml.v3 counts them
	list  ErrorList
}

func (ps *problems) add(p pos, format string, args ...any) {
	if p.line > ps.lines {
		// yaml.v3 places an empty last document past the end of the file.
		p = pos{max(ps.lines, 1), 1}
	}
	ps.list = append(ps.list, &Error{Path: ps.path, Line: p.line, Col: p.col, Msg: fmt.Sprintf(format, args...)})
}

// lineCount counts lines as yaml.v3 does: \r\n, \r, \n, NEL, LS and PS each end one.
func lineCount(src []byte) int {
	n := 1
	for i, r := range string(src) {
		switch r {
		case '\r':
			if i+1 == len(src) || src[i+1] != '\n' {
				n++
			}
		case '\n', '\u0085', '\u2028', '\u2029':
			n++
		}
	}
	return n
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// load parses src into a catalog. Structural problems are added to ps; the returned catalog
// holds whatever could be read, so validate can still report the rest.
func load(src []byte, ps *problems) *catalog {
	dec := yaml.NewDecoder(bytes.NewReader(src))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			ps.add(pos{1, 1}, "empty catalog: expected version, package and events")
			return nil
		}
		p, msg := syntaxError(src, err)
		ps.add(p, "invalid YAML: %s", msg)
		return nil
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		ps.add(nodePos(&extra), "a catalog is one YAML document; found a second one")
	} else if !errors.Is(err, io.EOF) {
		p, msg := syntaxError(src, err)
		ps.add(p, "invalid YAML: %s", msg)
		return nil
	}
	if len(doc.Content) == 0 {
		ps.add(pos{1, 1}, "empty catalog: expected version, package and events")
		return nil
	}
	root := doc.Content[0]
	l := &loader{ps: ps}
	if !l.mapping(root, "the catalog") {
		return nil
	}
	c := &catalog{root: nodePos(root), present: map[string]bool{}}
	l.keys(root, []string{"version", "package", "output", "defaults", "types", "events", "accept_breaking"}, func(key string, k, v *yaml.Node) {
		c.present[key] = true
		switch key {
		case "version":
			c.version = l.scalar(v, "version")
		case "package":
			c.pkg = l.scalar(v, "package")
		case "output":
			c.output = l.scalar(v, "output")
		case "defaults":
			d := l.policy(v, "defaults", false)
			c.defaults = &d
		case "types":
			if l.mapping(v, "types") {
				l.entries(v, func(k, v *yaml.Node) { c.types = append(c.types, l.typeDecl(k, v)) })
			}
		case "events":
			c.eventsAt = nodePos(k)
			if l.mapping(v, "events") {
				// Entries rejected one by one (bad keys) were reported; "no events" would be noise.
				c.present["events:entries"] = len(v.Content) > 0
				l.entries(v, func(k, v *yaml.Node) { c.events = append(c.events, l.eventDecl(k, v)) })
			}
		case "accept_breaking":
			c.accepts = l.acceptBreaking(v)
		}
	})
	return c
}

func yamlErrPos(err error) pos {
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		if n, convErr := strconv.Atoi(m[1]); convErr == nil {
			return pos{n, 1}
		}
	}
	return pos{1, 1}
}

func yamlErrMsg(err error) string {
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		return m[2]
	}
	return strings.TrimPrefix(err.Error(), "yaml: ")
}

type loader struct{ ps *problems }

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "nothing"
		}
		return fmt.Sprintf("%q", n.Value)
	case yaml.AliasNode:
		return "an alias"
	}
	return "an unknown node"
}

// alias reports YAML aliases: they are not part of the catalog language, and rejecting them
// keeps the walk finite on any input.
func (l *loader) alias(n *yaml.Node, what string) bool {
	if n.Kind == yaml.AliasNode {
		l.ps.add(nodePos(n), "%s: YAML aliases (*%s) are not supported; write the value out", what, n.Value)
		return true
	}
	return false
}

func (l *loader) mapping(n *yaml.Node, what string) bool {
	if l.alias(n, what) {
		return false
	}
	if n.Kind != yaml.MappingNode {
		l.ps.add(nodePos(n), "%s: expected a mapping, found %s", what, kindName(n))
		return false
	}
	return true
}

func (l *loader) scalar(n *yaml.Node, what string) *str {
	if l.alias(n, what) {
		return nil
	}
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		l.ps.add(nodePos(n), "%s: expected a value, found %s", what, kindName(n))
		return nil
	}
	return &str{n.Value, nodePos(n)}
}

// entries calls fn for each key/value pair of a mapping in order, reporting duplicate and
// non-scalar keys.
func (l *loader) entries(n *yaml.Node, fn func(k, v *yaml.Node)) {
	seen := map[string]pos{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			l.ps.add(nodePos(k), "keys must be plain names, found %s", kindName(k))
			continue
		}
		if first, dup := seen[k.Value]; dup {
			l.ps.add(nodePos(k), "duplicate key %q (first at line %d)", k.Value, first.line)
			continue
		}
		seen[k.Value] = nodePos(k)
		fn(k, v)
	}
}

// keys walks a mapping whose keys are fixed, reporting unknown ones with a suggestion, else
// with the keys allowed there.
func (l *loader) keys(n *yaml.Node, allowed []string, fn func(key string, k, v *yaml.Node)) {
	var empty *yaml.Node // the last known key, when it holds entries and was left empty
	l.entries(n, func(k, v *yaml.Node) {
		for _, a := range allowed {
			if a == k.Value {
				empty = nil
				if entryOf[a] != "" && v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
					empty = k
				}
				fn(a, k, v)
				return
			}
		}
		h := hint(k.Value, allowed, "")
		switch {
		case h != "":
		case n.Style&yaml.FlowStyle != 0 && v.Tag == "!!null":
			// {description: Street, building} reads "building" as a key without a value.
			h = " (inside {...} a comma ends a value: quote a value that has one)"
		case empty != nil:
			// "fields:" with nothing, then its entries one level too far left.
			h = fmt.Sprintf(" (%s? indent it under %s: on line %d; valid keys here: %s)", entryOf[empty.Value], empty.Value, empty.Line, strings.Join(allowed, ", "))
		default:
			h = fmt.Sprintf(" (valid keys here: %s)", strings.Join(allowed, ", "))
		}
		l.ps.add(nodePos(k), "unknown key %q%s", k.Value, h)
	})
}

// entryOf names an entry of the keys whose value is a mapping of names the user chooses.
var entryOf = map[string]string{"types": "a type", "events": "an event", "fields": "a field"}

func (l *loader) description(n *yaml.Node, what string) string {
	if s := l.scalar(n, what+": description"); s != nil {
		return strings.TrimSpace(s.v)
	}
	return ""
}

func (l *loader) policy(n *yaml.Node, what string, perEvent bool) policyDecl {
	d := policyDecl{p: nodePos(n)}
	if !l.mapping(n, what) {
		return d
	}
	l.keys(n, []string{"max_attempts", "backoff", "timeout"}, func(key string, k, v *yaml.Node) {
		l.policyKey(&d, what, key, k, v)
	})
	return d
}

func (l *loader) policyKey(d *policyDecl, what, key string, k, v *yaml.Node) {
	switch key {
	case "max_attempts":
		d.maxAttempts = l.scalar(v, what+": max_attempts")
	case "timeout":
		d.timeout = l.scalar(v, what+": timeout")
	case "concurrency":
		d.concurrency = l.scalar(v, what+": concurrency")
	case "rate_limit":
		d.rateLimit = l.scalar(v, what+": rate_limit")
	case "backoff":
		d.backoff = &str{"", nodePos(k)}
		if !l.mapping(v, what+": backoff") {
			return
		}
		l.keys(v, []string{"initial", "max"}, func(key string, _, v *yaml.Node) {
			if key == "initial" {
				d.backoffInitial = l.scalar(v, what+": backoff: initial")
			} else {
				d.backoffMax = l.scalar(v, what+": backoff: max")
			}
		})
	}
}

func (l *loader) strList(n *yaml.Node, what string) ([]str, *pos) {
	if l.alias(n, what) {
		return nil, nil
	}
	p := nodePos(n)
	if n.Kind == yaml.ScalarNode && n.Tag != "!!null" {
		return []str{{n.Value, p}}, &p // a single name is accepted for a one-element list
	}
	if n.Kind != yaml.SequenceNode {
		l.ps.add(p, "%s: expected a list, found %s", what, kindName(n))
		return nil, &p
	}
	var out []str
	for _, item := range n.Content {
		if s := l.scalar(item, what); s != nil {
			out = append(out, *s)
		}
	}
	return out, &p
}

func (l *loader) typeDecl(k, v *yaml.Node) *typeDecl {
	t := &typeDecl{name: str{k.Value, nodePos(k)}}
	what := fmt.Sprintf("type %q", k.Value)
	if !l.mapping(v, what) {
		return t
	}
	l.keys(v, []string{"description", "fields", "type", "values"}, func(key string, k, v *yaml.Node) {
		switch key {
		case "description":
			t.description = l.description(v, what)
		case "fields":
			p := nodePos(v)
			t.fieldsPos = &p
			t.fields = l.fields(v, what)
		case "type":
			t.kind = l.scalar(v, what+": type")
			t.isEnum = true
		case "values":
			t.values, t.valuesPos = l.strList(v, what+": values")
			t.isEnum = true
		}
	})
	return t
}

func (l *loader) eventDecl(k, v *yaml.Node) *eventDecl {
	e := &eventDecl{name: str{k.Value, nodePos(k)}, policy: policyDecl{p: nodePos(k)}}
	what := fmt.Sprintf("event %q", k.Value)
	if !l.mapping(v, what) {
		return e
	}
	l.keys(v, []string{"description", "fields", "idempotency_key", "ordering_key", "ordering_group", "max_attempts", "backoff", "timeout", "delivery", "delete_when_sent", "concurrency", "rate_limit"}, func(key string, k, v *yaml.Node) {
		switch key {
		case "description":
			e.description = l.description(v, what)
		case "fields":
			p := nodePos(v)
			e.fieldsPos = &p
			e.fields = l.fields(v, what)
		case "idempotency_key":
			e.key, e.keyPos = l.strList(v, what+": idempotency_key")
		case "ordering_key":
			e.orderingKey, e.orderingKeyPos = l.strList(v, what+": ordering_key")
		case "ordering_group":
			e.orderingGroup = l.scalar(v, what+": ordering_group")
		case "delivery":
			e.delivery = l.scalar(v, what+": delivery")
		case "delete_when_sent":
			e.deleteWhenSent = l.scalar(v, what+": delete_when_sent")
		default:
			l.policyKey(&e.policy, what, key, k, v)
		}
	})
	return e
}

func (l *loader) fields(n *yaml.Node, what string) []*fieldDecl {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil // "fields:" with nothing: an event without fields
	}
	if !l.mapping(n, what+": fields") {
		return nil
	}
	var out []*fieldDecl
	l.entries(n, func(k, v *yaml.Node) {
		f := &fieldDecl{name: str{k.Value, nodePos(k)}}
		fwhat := fmt.Sprintf("%s: field %q", what, k.Value)
		out = append(out, f)
		if l.alias(v, fwhat) {
			return
		}
		if v.Kind == yaml.ScalarNode {
			f.typ = l.scalar(v, fwhat)
			return
		}
		if !l.mapping(v, fwhat) {
			return
		}
		l.keys(v, []string{"type", "go", "go_name", "optional", "description", "values"}, func(key string, k, v *yaml.Node) {
			switch key {
			case "go_name":
				f.goName = l.scalar(v, fwhat+": go_name")
			case "type":
				f.typ = l.scalar(v, fwhat+": type")
			case "go":
				f.goType = l.scalar(v, fwhat+": go")
			case "optional":
				if s := l.scalar(v, fwhat+": optional"); s != nil {
					switch s.v {
					case "true":
						f.optional = true
					case "false":
					default:
						l.ps.add(s.p, "%s: optional must be true or false, found %q", fwhat, s.v)
					}
				}
			case "description":
				f.description = l.description(v, fwhat)
			case "values":
				f.values, f.valuesPos = l.strList(v, fwhat+": values")
			}
		})
		if f.typ == nil && f.goType == nil {
			l.ps.add(nodePos(v), "%s: missing type (add type: NAME or go: \"import/path.Type\")", fwhat)
		}
	})
	return out
}

// parseDuration reads a catalog duration: Go syntax (300ms, 1m30s, 1h), strictly positive.
func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q (use Go syntax such as 500ms, 30s, 5m, 1h)", s)
	}
	if d <= 0 {
		return 0, fmt.Errorf("duration %q must be greater than zero", s)
	}
	return d, nil
}
