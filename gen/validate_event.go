package gen

import (
	"fmt"
	"strings"
)

// keyScalars are the builtin types an idempotency key field may have (plus enums and {go:}).
var keyScalars = map[string]bool{"string": true, "bool": true, "int": true, "int32": true, "int64": true, "uint32": true, "uint64": true, "time": true}

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
			v.claim("EnqueueMany"+name, what+" (its EnqueueMany function)", e.name.p)
			v.claim("Register"+name, what+" (its Register function)", e.name.p)
		}
	}
	v.policy(&e.policy, what, direct)
	v.deleteWhenSent(e, what, direct)
	v.limits(&e.policy, what, direct)
	methods := payloadMethods[:len(payloadMethods):len(payloadMethods)]
	if !direct {
		methods = append(methods, "DecodeOutboxPayload")
	}
	if e.orderingKeyPos != nil && !direct {
		methods = append(methods, "OrderingKey")
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
