package gen

import (
	"path"
	"strconv"
	"strings"
	"time"
)

// This file is the third stage: a valid catalog becomes the model, in which every Go name,
// type and import is decided. The emitters only read it.

type typeKind int

const (
	kBuiltin typeKind = iota
	kNamed
	kSlice
	kMap
	kGo
)

// goType is a field's Go type.
type goType struct {
	kind    typeKind
	builtin string     // kBuiltin: the catalog name (string, time, bytes, ...)
	named   *namedType // kNamed
	elem    *goType    // kSlice, kMap
	path    string     // kGo
	name    string     // kGo
}

// namedType is a struct or an enum the generated file declares: one from types:, or an
// inline enum of a field.
type namedType struct {
	wire   string // catalog name, or "event.field" for an inline enum
	at     pos    // its name under types:, or the type: of the field an inline enum is declared by
	inline bool   // an inline enum, declared by a field
	goName string
	doc    string
	enum   bool
	values []enumValue
	fields []*field
	// validates: Validate() has something to check (an enum or a string somewhere inside).
	validates bool
	// decoded: a struct that an outbox event's payload holds, so the file has its checkXJSON.
	decoded bool
	enums   []*namedType // inline enums of a struct's fields, declared before it
}

type enumValue struct {
	wire, goName string
	at           pos
}

type field struct {
	wire, goName, doc string
	t                 *goType
	optional          bool
	at, typeAt        pos // its name; its type: (or go:) value
}

// policy holds what the catalog set for an event; zero fields mean the runtime's default.
type policy struct {
	maxAttempts           int
	initial, max, timeout time.Duration
	// deleteWhenSent is the event's delete_when_sent: true.
	deleteWhenSent bool
	// concurrency and rate are the event's limits (limits.go), zero when it sets none.
	concurrency int
	rate        rate
}

type event struct {
	wire, goName, doc string
	at                pos  // its name under events:
	keyAt, deliveryAt *pos // its idempotency_key: and delivery: values, when set
	fields            []*field
	key               []*field
	// orderingKey are the fields of its ordering_key, none for an unordered event; group is
	// its ordering group (ordering_group, else its wire name); orderingAt and groupAt are the
	// ordering_key: and ordering_group: values, when set.
	orderingKey         []*field
	group               string
	orderingAt, groupAt *pos
	direct              bool
	policy              policy
	enums               []*namedType // inline enums, declared before the payload
}

// file is everything one generated file holds.
type file struct {
	pkg    string
	path   string // output path, joined to the catalog's directory
	source string // the catalog, relative to the output's directory, for the header
	types  []*namedType
	events []*event
	// eventsAt is the events: key, where a comparison reports an event that is gone.
	eventsAt pos
	// accepts are the breaking changes accept_breaking: accepts; nothing is generated from them.
	accepts []acceptDecl
}

func (f *file) outboxEvents() []*event {
	var out []*event
	for _, e := range f.events {
		if !e.direct {
			out = append(out, e)
		}
	}
	return out
}

// DefaultOutput is the output file name when the catalog does not set output:.
const DefaultOutput = "outbox_gen.go"

func buildModel(c *catalog, catalogPath string) *file {
	out := DefaultOutput
	if c.output != nil {
		out = path.Clean(strings.ReplaceAll(c.output.v, `\`, "/"))
	}
	dir := path.Dir(strings.ReplaceAll(catalogPath, `\`, "/"))
	f := &file{pkg: c.pkg.v, path: path.Join(dir, out), source: relCatalog(out, path.Base(catalogPath)), eventsAt: c.eventsAt, accepts: c.accepts}

	named := map[string]*namedType{}
	for _, t := range c.types {
		nt := &namedType{wire: t.name.v, at: t.name.p, goName: goName(t.name.v), doc: t.description, enum: t.isEnum}
		named[t.name.v] = nt
		f.types = append(f.types, nt)
	}
	for _, t := range c.types {
		nt := named[t.name.v]
		if t.isEnum {
			nt.values = enumValues(t.values)
			continue
		}
		nt.fields = buildFields(t.fields, nt.goName, t.name.v, named, &nt.enums)
	}
	for _, e := range c.events {
		ev := &event{wire: e.name.v, at: e.name.p, keyAt: e.keyPos, goName: goName(e.name.v), doc: e.description}
		ev.direct = e.delivery != nil && e.delivery.v == "direct"
		if e.delivery != nil {
			ev.deliveryAt = &e.delivery.p
		}
		ev.fields = buildFields(e.fields, ev.goName, e.name.v, named, &ev.enums)
		ev.key = keyFieldsOf(ev.fields, e.key)
		if e.orderingKeyPos != nil {
			ev.orderingKey = keyFieldsOf(ev.fields, e.orderingKey)
			ev.orderingAt = e.orderingKeyPos
			ev.group = ev.wire
			if e.orderingGroup != nil {
				ev.group = e.orderingGroup.v
				ev.groupAt = &e.orderingGroup.p
			}
		}
		ev.policy = resolvePolicy(&e.policy, c.defaults, ev.direct)
		ev.policy.deleteWhenSent = e.deleteWhenSent != nil && e.deleteWhenSent.v == "true"
		f.events = append(f.events, ev)
	}
	markValidates(f)
	for _, e := range f.outboxEvents() {
		for _, fl := range e.fields {
			markDecoded(fl.t)
		}
	}
	return f
}

// keyFieldsOf returns the fields a key names, in the key's order.
func keyFieldsOf(fields []*field, key []str) []*field {
	var out []*field
	for _, k := range key {
		for _, fl := range fields {
			if fl.wire == k.v {
				out = append(out, fl)
			}
		}
	}
	return out
}

// groupEvents returns the outbox events of group, in file order.
func (f *file) groupEvents(group string) []*event {
	var out []*event
	for _, e := range f.outboxEvents() {
		if len(e.orderingKey) > 0 && e.group == group {
			out = append(out, e)
		}
	}
	return out
}

// markDecoded marks the structs inside t: a stored payload holding them is checked by their
// checkXJSON functions.
func markDecoded(t *goType) {
	switch t.kind {
	case kNamed:
		if t.named.enum || t.named.decoded {
			return
		}
		t.named.decoded = true
		for _, fl := range t.named.fields {
			markDecoded(fl.t)
		}
	case kSlice, kMap:
		markDecoded(t.elem)
	}
}

// relCatalog names the catalog as seen from the output's directory (examples/events/x.go ->
// ../../events.yaml), so the header is the same whichever directory the generator ran in.
func relCatalog(out, base string) string {
	depth := strings.Count(path.Dir(out), "/") + 1
	if path.Dir(out) == "." {
		depth = 0
	}
	return strings.Repeat("../", depth) + base
}

func enumValues(vals []str) []enumValue {
	out := make([]enumValue, len(vals))
	for i, v := range vals {
		out[i] = enumValue{wire: v.v, goName: goName(v.v), at: v.p}
	}
	return out
}

func buildFields(fs []*fieldDecl, owner, ownerWire string, named map[string]*namedType, enums *[]*namedType) []*field {
	out := make([]*field, 0, len(fs))
	for _, fd := range fs {
		fl := &field{wire: fd.name.v, goName: fieldGoName(fd), doc: fd.description, optional: fd.optional, at: fd.name.p}
		switch {
		case fd.goType != nil:
			fl.typeAt = fd.goType.p
			p, name, _ := splitGoType(fd.goType.v)
			fl.t = &goType{kind: kGo, path: p, name: name}
		case parseTypeExpr(fd.typ.v).base == "enum":
			fl.typeAt = fd.typ.p
			nt := &namedType{wire: ownerWire + "." + fd.name.v, at: fd.typ.p, inline: true, goName: owner + fl.goName, doc: fd.description, enum: true, values: enumValues(fd.values)}
			*enums = append(*enums, nt)
			fl.t = &goType{kind: kNamed, named: nt}
		default:
			fl.typeAt = fd.typ.p
			fl.t = typeOf(parseTypeExpr(fd.typ.v), named)
		}
		out = append(out, fl)
	}
	return out
}

func typeOf(te typeExpr, named map[string]*namedType) *goType {
	var t *goType
	if nt, ok := named[te.base]; ok {
		t = &goType{kind: kNamed, named: nt}
	} else {
		t = &goType{kind: kBuiltin, builtin: te.base}
	}
	for i := len(te.wrappers) - 1; i >= 0; i-- {
		if te.wrappers[i] == "[]" {
			t = &goType{kind: kSlice, elem: t}
		} else {
			t = &goType{kind: kMap, elem: t}
		}
	}
	return t
}

// resolvePolicy applies "most specific first": the event's setting, then defaults:; what
// neither sets stays zero, which the runtime reads as its built-in default. Direct events
// take no backoff (they retry briefly in-process).
func resolvePolicy(e, d *policyDecl, direct bool) policy {
	var p policy
	pick := func(ev, def *str) *str {
		if ev != nil {
			return ev
		}
		if d != nil {
			return def
		}
		return nil
	}
	var dm, dt, di, dx *str
	if d != nil {
		dm, dt, di, dx = d.maxAttempts, d.timeout, d.backoffInitial, d.backoffMax
	}
	if s := pick(e.maxAttempts, dm); s != nil {
		p.maxAttempts, _ = strconv.Atoi(s.v)
	}
	if s := pick(e.timeout, dt); s != nil {
		p.timeout, _ = parseDuration(s.v)
	}
	p.concurrency, p.rate = resolveLimits(e)
	if direct {
		return p
	}
	if s := pick(e.backoffInitial, di); s != nil {
		p.initial, _ = parseDuration(s.v)
	}
	if s := pick(e.backoffMax, dx); s != nil {
		p.max, _ = parseDuration(s.v)
	}
	return p
}

// markValidates decides which named types have something to validate (an enum or a string
// inside, directly or through other types), iterating to a fixed point because types may refer to
// each other through lists, maps and pointers.
func markValidates(f *file) {
	var all []*namedType
	for _, t := range f.types {
		all = append(all, t)
		all = append(all, t.enums...)
	}
	for _, e := range f.events {
		all = append(all, e.enums...)
	}
	for _, t := range all {
		t.validates = t.enum
	}
	for changed := true; changed; {
		changed = false
		for _, t := range all {
			if t.validates {
				continue
			}
			for _, fl := range t.fields {
				if needsValidate(fl.t) {
					t.validates = true
					changed = true
					break
				}
			}
		}
	}
}

// needsValidate reports whether Validate checks values of t: enums, and strings, which must
// be valid UTF-8 (encoding/json would replace the bad bytes with U+FFFD and store another
// value than the one given), map keys included.
func needsValidate(t *goType) bool {
	switch t.kind {
	case kNamed:
		return t.named.validates
	case kSlice:
		return needsValidate(t.elem)
	case kMap:
		return true // its keys are strings
	case kBuiltin:
		return t.builtin == "string"
	}
	return false
}

// needsWireCheck reports whether a stored value of t is checked beyond json.Unmarshal: a
// struct's fields must be present, an enum's value must be in the catalog.
func needsWireCheck(t *goType) bool {
	switch t.kind {
	case kNamed:
		return true
	case kSlice, kMap:
		return needsWireCheck(t.elem)
	}
	return false
}

// nullOnWire reports whether Enqueue writes null for some value of t that is not a nil
// pointer: a nil list, map, []byte or json.RawMessage, and any {go:} type (its own
// MarshalJSON decides). A stored null for a field of another type is a problem.
func nullOnWire(t *goType) bool {
	switch t.kind {
	case kSlice, kMap, kGo:
		return true
	case kBuiltin:
		return t.builtin == "bytes" || t.builtin == "json"
	}
	return false
}

// hasTime reports whether a value of t holds a time.Time that its own type's MarshalJSON
// does not already normalise (named structs normalise their own fields).
func hasTime(t *goType) bool {
	switch t.kind {
	case kBuiltin:
		return t.builtin == "time"
	case kSlice, kMap:
		return hasTime(t.elem)
	}
	return false
}
