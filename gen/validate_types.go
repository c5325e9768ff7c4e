package gen

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
)

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
		// A collision is reported at go_name: when it set the Go name, and its fix is another
		// go_name; else at the field's name.
		at, fix := f.name.p, "rename one of them"
		if f.goName != nil {
			at, fix = f.goName.p, "choose another go_name"
		}
		nameOK := fieldNameRe.MatchString(f.name.v)
		if !nameOK {
			v.ps.add(f.name.p, "%s: invalid field name (use letters, digits and _, starting with a letter)", fwhat)
		}
		if f.goName != nil && !goIdentRe.MatchString(f.goName.v) {
			v.ps.add(f.goName.p, "%s: go_name %q must be an exported Go identifier: an upper-case ASCII letter, then letters, digits and _ (%s)", fwhat, f.goName.v, goNameHint(f.goName.v))
			nameOK = false
		}
		if nameOK {
			g := fieldGoName(f)
			if other, dup := goNames[g]; dup {
				v.ps.add(at, "%s: Go name %s collides with field %q; %s", fwhat, g, other, fix)
			} else {
				goNames[g] = f.name.v
			}
			for _, m := range methods {
				if g == m {
					v.ps.add(at, "%s: Go name %s collides with the generated method %s.%s; %s", fwhat, g, owner, m, strings.Replace(fix, "rename one of them", "rename the field", 1))
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
		v.enumValues(f.values, f.valuesPos, f.typ.p, what, owner+fieldGoName(f))
		v.claim(owner+fieldGoName(f), what+" (its enum type)", f.name.p)
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

// goNameHint suggests the exported identifier closest to a refused go_name: the derived name
// of what it holds (sku -> Sku, order-id -> OrderID), or what to change.
func goNameHint(s string) string {
	for _, r := range s {
		if r > unicode.MaxASCII {
			return "generated code keeps to ASCII names"
		}
	}
	if g := goName(s); goIdentRe.MatchString(g) {
		return fmt.Sprintf("did you mean %q?", g)
	}
	return "start it with an upper-case letter"
}
