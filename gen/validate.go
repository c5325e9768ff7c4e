package gen

import (
	"errors"
	"fmt"
	"go/token"
	"math"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// This file is the second stage: every semantic check of a loaded catalog, all problems
// collected. The model stage runs only when validate found nothing, so it can trust its input.

var (
	wireNameRe  = regexp.MustCompile(`^[a-z][a-z0-9_.]*$`)
	typeNameRe  = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	fieldNameRe = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]*$`)
	packageRe   = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	goIdentRe   = regexp.MustCompile(`^[A-Z][A-Za-z0-9_]*$`)
	goPathRe    = regexp.MustCompile(`^[A-Za-z0-9_.~+-]+(/[A-Za-z0-9_.~+-]+)*$`)
)

// builtinTypes are the catalog's scalar and special types, in the order docs/events-yaml.md lists
// them.
var builtinTypes = []string{"string", "bool", "int", "int32", "int64", "uint32", "uint64", "float64", "time", "duration", "bytes", "json"}

func isBuiltin(s string) bool {
	for _, b := range builtinTypes {
		if b == s {
			return true
		}
	}
	return false
}

// typeAdvice answers type names from Go and other schema languages that the catalog spells
// differently or leaves out.
var typeAdvice = map[string]string{
	"map":         `a map is written with its key and value types, quoted: "map[string]T"`,
	"any":         "use json for any JSON value",
	"interface{}": "use json for any JSON value",
	"object":      "use json for any JSON value, or declare a struct under types:",
	"decimal":     `no decimal type: use string, or a decimal Go type as {go: "import/path.Type"}`,
	"func":        "a function cannot be serialised into an event; send data",
}

// maxBackoff is the longest backoff.max the runtime accepts (runtime/outbox's maxDelay, which
// keeps a delay inside the DATETIME arithmetic of every server); a longer one would pass here
// and make outbox.NewWorker refuse the router.
const maxBackoff = 100 * 365 * 24 * time.Hour

// keyScalars are the builtin types an idempotency key field may have (plus enums and {go:}).
var keyScalars = map[string]bool{"string": true, "bool": true, "int": true, "int32": true, "int64": true, "uint32": true, "uint64": true, "time": true}

// reservedMethods are the methods of generated structs, which a field's Go name must not take.
var (
	payloadMethods = []string{"EventType", "IdempotencyKey", "Validate", "MarshalJSON"}
	structMethods  = []string{"Validate", "MarshalJSON"}
)

// typeExpr is a parsed field type: wrappers ("[]" or "map") around a base name.
type typeExpr struct {
	wrappers []string
	base     string
}

func parseTypeExpr(s string) typeExpr {
	var t typeExpr
	s = strings.TrimSpace(s)
	for {
		switch {
		case strings.HasPrefix(s, "[]"):
			t.wrappers = append(t.wrappers, "[]")
			s = strings.TrimSpace(s[2:])
			continue
		case strings.HasPrefix(s, "map[string]"):
			t.wrappers = append(t.wrappers, "map")
			s = strings.TrimSpace(s[len("map[string]"):])
			continue
		}
		break
	}
	t.base = s
	return t
}

// splitGoType splits "import/path.Type" at the last dot after the last slash.
func splitGoType(s string) (importPath, name string, ok bool) {
	slash := strings.LastIndex(s, "/")
	dot := strings.LastIndex(s, ".")
	if dot <= slash || dot == len(s)-1 {
		return "", "", false
	}
	return s[:dot], s[dot+1:], true
}

type validator struct {
	ps       *problems
	c        *catalog
	types    map[string]*typeDecl
	renamed  map[string]bool      // the suggested names of invalidly named types
	typeHint []string             // names a field's type may be, for did-you-mean
	names    map[string]nameOwner // every generated top-level Go name
	modules  *[]string            // the modules the catalog's go.mod and go.work name, once looked up
	goTypes  *goTypeChecker       // reads {go:} key types' declarations, once needed
	badGo    map[*fieldDecl]bool  // fields whose go: was reported already
	// groups holds the events of each ordering group with a valid key, in file order;
	// groupOrder the groups as they first appear.
	groups     map[string][]orderedEvent
	groupOrder []string
}

type nameOwner struct {
	what string
	p    pos
}

func validate(c *catalog, ps *problems) {
	v := &validator{ps: ps, c: c, types: map[string]*typeDecl{}, renamed: map[string]bool{}, names: map[string]nameOwner{}, badGo: map[*fieldDecl]bool{}, groups: map[string][]orderedEvent{}}
	v.header()
	v.policy(c.defaults, "defaults", false)
	v.claim("Handlers", "the generated Handlers interface", pos{})
	v.claim("NewRouter", "the generated NewRouter function", pos{})
	declared := map[string]bool{}
	for _, t := range c.types {
		declared[t.name.v] = true
	}
	v.typeHint = append([]string{"enum"}, builtinTypes...)
	for _, t := range c.types {
		if !typeNameRe.MatchString(t.name.v) {
			// Suggest a name only when it would be accepted. Fields that already use it are
			// not reported again: this error covers them.
			suggest := ""
			if s := snakeName(t.name.v); typeNameRe.MatchString(s) && !isBuiltin(s) && s != "enum" && !declared[s] && !v.renamed[s] {
				suggest = fmt.Sprintf(" (did you mean %q?)", s)
				v.renamed[s] = true
				v.typeHint = append(v.typeHint, s)
			}
			ps.add(t.name.p, "type %q: invalid name: use lower_snake_case, [a-z][a-z0-9_]*%s", t.name.v, suggest)
			continue
		}
		if isBuiltin(t.name.v) || t.name.v == "enum" {
			ps.add(t.name.p, "type %q: the name of a built-in type; choose another", t.name.v)
			continue
		}
		v.types[t.name.v] = t
		v.typeHint = append(v.typeHint, t.name.v)
	}
	for _, t := range c.types {
		v.typeDecl(t)
	}
	if len(c.events) == 0 && !c.present["events:entries"] {
		ps.add(c.root, "no events: add an events: mapping with at least one event")
	}
	for _, e := range c.events {
		v.event(e)
	}
	v.orderingGroups()
	v.cycles()
}

func (v *validator) header() {
	c, ps := v.c, v.ps
	switch {
	case c.version == nil:
		if !c.present["version"] {
			ps.add(c.root, "missing version: add `version: 1`")
		}
	case c.version.v != "1":
		ps.add(c.version.p, "unsupported version %q: this outboxgen reads version 1", c.version.v)
	}
	switch {
	case c.pkg == nil:
		if !c.present["package"] {
			ps.add(c.root, "missing package: add `package: NAME`, the Go package of the generated file")
		}
	case !packageRe.MatchString(c.pkg.v):
		ps.add(c.pkg.p, "package %q: not a valid Go package name (use lowercase letters, digits and _)", c.pkg.v)
	case token.IsKeyword(c.pkg.v):
		ps.add(c.pkg.p, "package %q: a Go keyword cannot be a package name", c.pkg.v)
	}
	if c.output != nil {
		out := c.output.v
		clean := path.Clean(strings.ReplaceAll(out, `\`, "/"))
		switch {
		case path.IsAbs(clean) || strings.HasPrefix(out, `\`) || (len(out) > 1 && out[1] == ':'):
			ps.add(c.output.p, "output %q: must be a path relative to the catalog's directory", out)
		case clean == ".." || strings.HasPrefix(clean, "../"):
			ps.add(c.output.p, "output %q: outside the catalog's directory; generate next to the catalog or below it", out)
		case !strings.HasSuffix(clean, ".go"):
			ps.add(c.output.p, "output %q: must name a .go file", out)
		case strings.HasSuffix(clean, "_test.go"):
			ps.add(c.output.p, "output %q: a _test.go file is only compiled in tests; choose another name", out)
		}
	}
}

// claim records a generated top-level Go name and reports a collision with an earlier one.
func (v *validator) claim(name, what string, p pos) bool {
	if prev, taken := v.names[name]; taken {
		at := ""
		if prev.p.line > 0 {
			at = fmt.Sprintf(" (line %d)", prev.p.line)
		}
		v.ps.add(p, "%s: Go name %s collides with %s%s; rename one of them", what, name, prev.what, at)
		return false
	}
	v.names[name] = nameOwner{what, p}
	return true
}

func (v *validator) policy(d *policyDecl, what string, direct bool) {
	if d == nil {
		return
	}
	if d.maxAttempts != nil {
		// The value goes to outbox_messages.max_attempts, an INT: a larger one passes here and
		// then fails every Enqueue.
		n, err := strconv.ParseInt(d.maxAttempts.v, 10, 64)
		switch {
		case errors.Is(err, strconv.ErrRange) && !strings.HasPrefix(d.maxAttempts.v, "-"), err == nil && n > math.MaxInt32:
			v.ps.add(d.maxAttempts.p, "%s: max_attempts %s is over %d, the most the max_attempts column (INT) holds", what, d.maxAttempts.v, math.MaxInt32)
		case err != nil || n < 1:
			v.ps.add(d.maxAttempts.p, "%s: max_attempts must be a whole number from 1 to %d, found %q", what, math.MaxInt32, d.maxAttempts.v)
		}
	}
	if d.timeout != nil {
		if _, err := parseDuration(d.timeout.v); err != nil {
			v.ps.add(d.timeout.p, "%s: timeout: %v", what, err)
		}
	}
	if direct && d.backoff != nil {
		v.ps.add(d.backoff.p, "%s: backoff applies to outbox delivery; a direct event retries a few times within its timeout", what)
		return
	}
	if d.backoff != nil && d.backoffInitial == nil && d.backoffMax == nil {
		v.ps.add(d.backoff.p, "%s: backoff: set initial, max or both", what)
	}
	var initial, max time.Duration
	if d.backoffInitial != nil {
		var err error
		if initial, err = parseDuration(d.backoffInitial.v); err != nil {
			v.ps.add(d.backoffInitial.p, "%s: backoff: initial: %v", what, err)
		}
	}
	if d.backoffMax != nil {
		var err error
		if max, err = parseDuration(d.backoffMax.v); err != nil {
			v.ps.add(d.backoffMax.p, "%s: backoff: max: %v", what, err)
		} else if max > maxBackoff {
			v.ps.add(d.backoffMax.p, "%s: backoff: max %s is over %s (100 years), the longest delay outbox.NewWorker accepts", what, d.backoffMax.v, shortDuration(maxBackoff))
		}
	}
	if initial > 0 || max > 0 {
		// Compare what the worker will use: unset bounds come from defaults:, then the runtime.
		ri, rm := initial, max
		if dd := v.c.defaults; dd != nil && d != dd {
			if ri == 0 && dd.backoffInitial != nil {
				ri, _ = parseDuration(dd.backoffInitial.v)
			}
			if rm == 0 && dd.backoffMax != nil {
				rm, _ = parseDuration(dd.backoffMax.v)
			}
		}
		if ri == 0 {
			ri = outbox.DefaultBackoffInitial
		}
		if rm == 0 {
			rm = outbox.DefaultBackoffMax
		}
		if ri > rm {
			v.ps.add(d.backoff.p, "%s: backoff: initial %s is longer than max %s", what, shortDuration(ri), shortDuration(rm))
		}
	}
}

func (v *validator) typeDecl(t *typeDecl) {
	what := fmt.Sprintf("type %q", t.name.v)
	name := goName(t.name.v)
	if typeNameRe.MatchString(t.name.v) {
		v.claim(name, what, t.name.p)
	}
	if t.isEnum {
		if t.kind != nil && t.kind.v != "enum" {
			v.ps.add(t.kind.p, "%s: type must be enum (a struct type has fields: instead), found %q", what, t.kind.v)
		}
		if t.fieldsPos != nil {
			v.ps.add(*t.fieldsPos, "%s: an enum has values:, not fields:", what)
		}
		v.enumValues(t.values, t.valuesPos, t.name.p, what, name)
		return
	}
	if t.fieldsPos == nil {
		v.ps.add(t.name.p, "%s: needs fields: (a struct) or type: enum with values:", what)
		return
	}
	v.fields(t.fields, what, name, structMethods)
}

func (v *validator) enumValues(values []str, at *pos, owner pos, what, typeName string) {
	if at == nil {
		v.ps.add(owner, "%s: an enum needs values: [A, B, ...]", what)
		return
	}
	if len(values) == 0 {
		v.ps.add(*at, "%s: an enum needs at least one value", what)
		return
	}
	seen := map[string]pos{}
	goSeen := map[string]string{}
	for _, val := range values {
		if val.v == "" {
			v.ps.add(val.p, "%s: empty enum value", what)
			continue
		}
		if first, dup := seen[val.v]; dup {
			v.ps.add(val.p, "%s: duplicate enum value %q (first at line %d)", what, val.v, first.line)
			continue
		}
		seen[val.v] = val.p
		g := goName(val.v)
		if g == "" {
			v.ps.add(val.p, "%s: enum value %q has no ASCII letters or digits to name its Go constant", what, val.v)
			continue
		}
		if other, dup := goSeen[g]; dup {
			v.ps.add(val.p, "%s: enum values %q and %q have the same Go name %s%s", what, other, val.v, typeName, g)
			continue
		}
		goSeen[g] = val.v
		v.claim(typeName+g, fmt.Sprintf("%s: value %q", what, val.v), val.p)
	}
}

// fields checks a struct's fields; owner is the Go name of the struct, methods its own.
func (v *validator) fields(fs []*fieldDecl, what, owner string, methods []string) {
	goNames := map[string]string{}
	for _, f := range fs {
		fwhat := fmt.Sprintf("%s: field %q", what, f.name.v)
		if !fieldNameRe.MatchString(f.name.v) {
			v.ps.add(f.name.p, "%s: invalid field name (use letters, digits and _, starting with a letter)", fwhat)
		} else {
			g := goName(f.name.v)
			if other, dup := goNames[g]; dup {
				v.ps.add(f.name.p, "%s: Go name %s collides with field %q; rename one of them", fwhat, g, other)
			} else {
				goNames[g] = f.name.v
			}
			for _, m := range methods {
				if g == m {
					v.ps.add(f.name.p, "%s: Go name %s collides with the generated method %s.%s; rename the field", fwhat, g, owner, m)
				}
			}
		}
		v.fieldType(f, fwhat, owner)
	}
}

func (v *validator) fieldType(f *fieldDecl, what, owner string) {
	if f.goType != nil {
		if f.typ != nil {
			v.ps.add(f.typ.p, "%s: set either type: or go:, not both", what)
		}
		if f.values != nil {
			v.ps.add(*f.valuesPos, "%s: values: belong to type: enum", what)
		}
		p, name, ok := splitGoType(f.goType.v)
		if !ok || !goPathRe.MatchString(p) || !goIdentRe.MatchString(name) {
			v.ps.add(f.goType.p, "%s: go: %q must be \"import/path.Type\" with an exported type name", what, f.goType.v)
			v.badGo[f] = true
			return
		}
		if first, _, _ := strings.Cut(p, "/"); !strings.Contains(first, ".") && !v.inKnownModule(p) && !stdPackage(p) {
			var fixes []string
			for _, std := range stdPackagesNamed(p) {
				fixes = append(fixes, strconv.Quote(std+"."+name))
			}
			fix := "write the full import path, such as example.com/mod/pkg.Type"
			if len(fixes) > 0 {
				fix = "did you mean " + strings.Join(fixes, " or ") + "?"
			}
			v.ps.add(f.goType.p, "%s: go: %q: no standard-library package %q, and other import paths start with a domain (%s)", what, f.goType.v, p, fix)
			v.badGo[f] = true
		}
		return
	}
	if f.typ == nil {
		return // reported by load
	}
	te := parseTypeExpr(f.typ.v)
	if te.base == "enum" {
		if len(te.wrappers) > 0 {
			v.ps.add(f.typ.p, "%s: an inline enum cannot be wrapped in %q; declare it under types: and use that name", what, f.typ.v)
			return
		}
		v.enumValues(f.values, f.valuesPos, f.typ.p, what, owner+goName(f.name.v))
		v.claim(owner+goName(f.name.v), what+" (its enum type)", f.name.p)
		return
	}
	if f.values != nil {
		v.ps.add(*f.valuesPos, "%s: values: belong to type: enum", what)
	}
	if isBuiltin(te.base) {
		return
	}
	if _, ok := v.types[te.base]; ok || v.renamed[te.base] {
		return
	}
	switch {
	case te.base == "":
		v.ps.add(f.typ.p, "%s: missing element type in %q", what, f.typ.v)
	case strings.HasPrefix(te.base, "map[") || strings.HasPrefix(te.base, "*") || strings.HasPrefix(te.base, "["):
		v.ps.add(f.typ.p, "%s: unsupported type %q (use []T, map[string]T, or optional: true for a pointer)", what, f.typ.v)
	case strings.Contains(te.base, "."):
		v.ps.add(f.typ.p, "%s: unknown type %q (for a Go type, write {go: %q})", what, te.base, te.base)
	case typeAdvice[te.base] != "":
		v.ps.add(f.typ.p, "%s: unknown type %q (%s)", what, te.base, typeAdvice[te.base])
	default:
		v.ps.add(f.typ.p, "%s: unknown type %q%s", what, te.base, hint(te.base, v.typeHint, ""))
	}
}

func (v *validator) event(e *eventDecl) {
	what := fmt.Sprintf("event %q", e.name.v)
	if !wireNameRe.MatchString(e.name.v) {
		suggest := ""
		if low := strings.ToLower(strings.ReplaceAll(e.name.v, " ", "_")); wireNameRe.MatchString(low) {
			suggest = fmt.Sprintf(" (did you mean %q?)", low)
		}
		v.ps.add(e.name.p, "%s: invalid wire name: use [a-z][a-z0-9_.]*%s", what, suggest)
		return
	}
	direct := false
	if e.delivery != nil {
		switch e.delivery.v {
		case "outbox":
		case "direct":
			direct = true
		default:
			v.ps.add(e.delivery.p, "%s: delivery must be outbox or direct, found %q%s", what, e.delivery.v, hint(e.delivery.v, []string{"outbox", "direct"}, ""))
		}
	}
	name := goName(e.name.v)
	// When the event's own name collides, its derived names collide too: report it once.
	if v.claim(name, what, e.name.p) {
		v.claim(name+"Handler", what+" (its handler interface)", e.name.p)
		if direct {
			v.claim("Send"+name, what+" (its Send function)", e.name.p)
		} else {
			v.claim("Enqueue"+name, what+" (its Enqueue function)", e.name.p)
			v.claim("Register"+name, what+" (its Register function)", e.name.p)
		}
	}
	v.policy(&e.policy, what, direct)
	methods := payloadMethods
	if e.orderingKeyPos != nil && !direct {
		methods = append(methods[:len(methods):len(methods)], "OrderingKey")
	}
	v.fields(e.fields, what, name, methods)
	byName := map[string]*fieldDecl{}
	var names []string
	for _, f := range e.fields {
		byName[f.name.v] = f
		names = append(names, f.name.v)
	}
	if e.keyPos != nil {
		v.keyFields(what, "idempotency_key", e.key, *e.keyPos, byName, names)
	}
	v.ordering(e, what, direct, byName, names)
}

// keyFields checks the fields of a key (idempotency_key or ordering_key, named by label): each
// must exist, once, be set (not optional) and be a scalar. It returns the key's fields and
// whether all of them passed, their types known.
func (v *validator) keyFields(what, label string, key []str, at pos, byName map[string]*fieldDecl, names []string) ([]*fieldDecl, bool) {
	if len(key) == 0 {
		v.ps.add(at, "%s: %s: list at least one field, or leave the key out", what, label)
		return nil, false
	}
	var out []*fieldDecl
	ok := true
	seen := map[string]bool{}
	for _, k := range key {
		kwhat := fmt.Sprintf("%s: %s %q", what, label, k.v)
		f, found := byName[k.v]
		problem := true
		switch {
		case !found:
			v.ps.add(k.p, "%s: no such field%s", kwhat, hint(k.v, names, ""))
		case seen[k.v]:
			v.ps.add(k.p, "%s: listed twice", kwhat)
		case f.optional:
			v.ps.add(k.p, "%s: the field is optional; key fields must always be set", kwhat)
		case f.goType != nil:
			if !v.badGo[f] {
				if why := v.goKeyProblem(f.goType.v); why != "" {
					v.ps.add(k.p, "%s: %s", kwhat, why)
				} else {
					problem = false
				}
			}
		case !v.keyScalar(f):
			v.ps.add(k.p, "%s: its type %s cannot be a key (key fields are string, bool, int, int32, int64, uint32, uint64, time, an enum or a {go:} type of string kind)", kwhat, v.typeForKey(f))
		default:
			problem = !v.knownType(f)
		}
		seen[k.v] = true
		ok = ok && !problem
		out = append(out, f)
	}
	return out, ok
}

// maxGroupLen is the longest ordering group: a hashed ordering key is the group, ":sha256:"
// and 64 hex digits, and must fit the 191-byte ordering_key column.
const maxGroupLen = maxKeyLen - len(":sha256:") - 64

// orderedEvent is an event with a valid ordering key, for the check that the events of one
// group agree on the key's types.
type orderedEvent struct {
	e     *eventDecl
	types []string
}

// ordering checks ordering_key and ordering_group, and files the event under its group.
func (v *validator) ordering(e *eventDecl, what string, direct bool, byName map[string]*fieldDecl, names []string) {
	if direct && (e.orderingKeyPos != nil || e.orderingGroup != nil) {
		// ordering_key is looked at first: with it set, ordering_group may be absent (nil).
		var at pos
		keys := "ordering_key"
		if e.orderingKeyPos != nil {
			at = *e.orderingKeyPos
			if e.orderingGroup != nil {
				keys += " and ordering_group"
			}
		} else {
			at, keys = e.orderingGroup.p, "ordering_group"
		}
		v.ps.add(at, "%s: a delivery: direct event cannot be ordered: SendX calls its handler at once, in-process, and stores nothing to keep in order; remove %s, or deliver it through the outbox", what, keys)
		return
	}
	if e.orderingKeyPos == nil {
		if e.orderingGroup != nil {
			v.ps.add(e.orderingGroup.p, "%s: ordering_group without ordering_key: a group orders the messages of equal key values; add ordering_key: [fields], or remove ordering_group", what)
		}
		return
	}
	fields, ok := v.keyFields(what, "ordering_key", e.orderingKey, *e.orderingKeyPos, byName, names)
	group, at := e.name.v, *e.orderingKeyPos
	if e.orderingGroup != nil {
		group, at = e.orderingGroup.v, e.orderingGroup.p
		if !wireNameRe.MatchString(group) {
			suggest := ""
			if low := strings.ToLower(strings.NewReplacer(" ", "_", "-", "_").Replace(group)); wireNameRe.MatchString(low) {
				suggest = fmt.Sprintf(" (did you mean %q?)", low)
			}
			v.ps.add(at, "%s: ordering_group %q: invalid name: use [a-z][a-z0-9_.]*, as for wire names%s", what, group, suggest)
			return
		}
	}
	if len(group) > maxGroupLen {
		fix := "shorten it"
		if e.orderingGroup == nil {
			fix = "set a shorter ordering_group"
		}
		v.ps.add(at, "%s: ordering group %q is %d bytes, more than %d: a long key is hashed to the group, \":sha256:\" and 64 hex digits, which must fit the 191-byte ordering_key column; %s", what, group, len(group), maxGroupLen, fix)
		return
	}
	if !ok {
		return // its own errors say what is wrong with its key
	}
	types := make([]string, len(fields))
	for i, f := range fields {
		types[i] = keyTypeText(f)
	}
	if _, seen := v.groups[group]; !seen {
		v.groupOrder = append(v.groupOrder, group)
	}
	v.groups[group] = append(v.groups[group], orderedEvent{e, types})
}

// keyTypeText names the type of a key field for comparing keys: the catalog's spelling, an
// inline enum with its values.
func keyTypeText(f *fieldDecl) string {
	if f.goType != nil {
		return "{go: " + f.goType.v + "}"
	}
	t := strings.TrimSpace(f.typ.v)
	if t == "enum" {
		vals := make([]string, len(f.values))
		for i, val := range f.values {
			vals[i] = val.v
		}
		return "enum [" + strings.Join(vals, ", ") + "]"
	}
	return t
}

// orderingGroups reports the events of a group whose key fields differ in number or type from
// another event's of the group: on each such event, naming the first event of every other
// shape. Keys of one aggregate must be equal for equal values, whichever event carries them.
func (v *validator) orderingGroups() {
	for _, group := range v.groupOrder {
		evs := v.groups[group]
		for _, ev := range evs {
			var others []string
			shapes := map[string]bool{strings.Join(ev.types, ", "): true}
			for _, o := range evs {
				shape := strings.Join(o.types, ", ")
				if shapes[shape] {
					continue
				}
				shapes[shape] = true
				others = append(others, fmt.Sprintf("by (%s) in event %q (line %d)", shape, o.e.name.v, o.e.name.p.line))
			}
			if len(others) == 0 {
				continue
			}
			v.ps.add(*ev.e.orderingKeyPos, "event %q: ordering group %q is keyed %s, but by (%s) here; the events of a group need key fields of the same types in the same order, so that one aggregate gets one key", ev.e.name.v, group, andList(others), strings.Join(ev.types, ", "))
		}
	}
}

// knownType reports whether f's type resolves: a builtin, an enum, a declared type or a {go:}
// type that was not refused.
func (v *validator) knownType(f *fieldDecl) bool {
	if f.goType != nil {
		return !v.badGo[f]
	}
	if f.typ == nil {
		return false
	}
	te := parseTypeExpr(f.typ.v)
	return te.base == "enum" || isBuiltin(te.base) || v.types[te.base] != nil
}

// typeForKey names the type of a field that cannot be a key: float64, "[]string" (a list).
func (v *validator) typeForKey(f *fieldDecl) string {
	te := parseTypeExpr(f.typ.v)
	switch {
	case len(te.wrappers) > 0 && te.wrappers[0] == "[]":
		return fmt.Sprintf("%q (a list)", f.typ.v)
	case len(te.wrappers) > 0:
		return fmt.Sprintf("%q (a map)", f.typ.v)
	case v.types[te.base] != nil:
		return te.base + " (a struct)"
	}
	return te.base
}

// goKeyProblem says why the {go:} type goType cannot be a key field, or "". The key is built
// with string(value), so the type must be a string kind, and the generator proves it from the
// type's declaration: a type it cannot read is refused too, rather than left to fail in go
// build after the file is written.
func (v *validator) goKeyProblem(goType string) string {
	if v.goTypes == nil {
		v.goTypes = &goTypeChecker{catalogDir: v.ps.dir}
	}
	p, name, _ := splitGoType(goType)
	k := v.goTypes.underlyingKind(p, name)
	switch {
	case k.err != nil:
		return fmt.Sprintf("cannot check that {go: %s} is a string kind: %v (outboxgen reads a {go:} key type's declaration from GOROOT, this module, go.work, a replace directory, vendor/ or the module cache: run go mod download, or key on another field)", goType, k.err)
	case k.kind != "string":
		return fmt.Sprintf("{go: %s} is not a string kind: its underlying type is %s (a {go:} key field needs a type declared on string, such as type ID string; else key on a string, integer, bool, time or enum field)", goType, k.kind)
	}
	return ""
}

// keyScalar reports whether f may be a key field. A field without a type, or with an unknown
// one, passes: its own error is enough.
func (v *validator) keyScalar(f *fieldDecl) bool {
	if f.goType != nil {
		return true // goKeyProblem checks it
	}
	if f.typ == nil {
		return true
	}
	te := parseTypeExpr(f.typ.v)
	if len(te.wrappers) > 0 {
		return false
	}
	if te.base == "enum" || keyScalars[te.base] || v.renamed[te.base] {
		return true // a renamed type is checked once it has its new name
	}
	if t, ok := v.types[te.base]; ok {
		return t.isEnum
	}
	return !isBuiltin(te.base)
}

// cycles reports struct types that contain themselves by value: such a struct has infinite
// size. A reference through []T, map[string]T or optional: true is fine.
func (v *validator) cycles() {
	const (
		white = iota
		grey
		black
	)
	color := map[string]int{}
	var names []string
	for n := range v.types {
		names = append(names, n)
	}
	sort.Strings(names)
	reported := map[string]bool{}
	var visit func(name string, path []string)
	visit = func(name string, path []string) {
		t := v.types[name]
		if t == nil || t.isEnum {
			return
		}
		color[name] = grey
		for _, f := range t.fields {
			if f.typ == nil || f.optional {
				continue
			}
			te := parseTypeExpr(f.typ.v)
			if len(te.wrappers) > 0 {
				continue
			}
			next := te.base
			switch color[next] {
			case grey:
				start := v.types[next]
				if !reported[next] && start != nil {
					reported[next] = true
					chain := append(append([]string(nil), path...), name+"."+f.name.v, next)
					v.ps.add(f.name.p, "type %q: contains itself by value (%s); make the field optional: true, or a list", next, strings.Join(cycleChain(chain, next), " -> "))
				}
			case white:
				visit(next, append(path, name+"."+f.name.v))
			}
		}
		color[name] = black
	}
	for _, n := range names {
		if color[n] == white {
			visit(n, nil)
		}
	}
}

// cycleChain trims a DFS path to the cycle that starts and ends at name.
func cycleChain(chain []string, name string) []string {
	for i, step := range chain {
		if step == name || strings.HasPrefix(step, name+".") {
			return chain[i:]
		}
	}
	return chain
}
