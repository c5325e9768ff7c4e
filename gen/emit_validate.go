package gen

import (
	"fmt"
	"strings"

	"github.com/dave/jennifer/jen"
)

// genValidate emits Validate for a struct: enums inside it (through lists, maps, pointers and
// other types), strings that are not valid UTF-8 (map keys too), and key strings that must not
// be empty. Every problem is returned, joined.
func (g *emitter) genValidate(recv, typeName, prefix string, fs []*field, nonEmpty []keyString) {
	var body []jen.Code
	goKeys := map[*field]bool{}
	for _, k := range nonEmpty {
		fl := k.fl
		x := jen.Id(recv).Dot(fl.goName)
		if fl.t.kind == kGo {
			x = jen.Qual(outboxPkg, "KeyText").Call(x)
			goKeys[fl] = true
		}
		body = append(body, jen.If(x.Op("==").Lit("")).Block(
			appendErr(jen.Qual("errors", "New").Call(jen.Lit(prefix+fl.wire+" is empty; it is part of "+k.key))),
		))
	}
	var enums, strs bool
	for _, fl := range fs {
		if goKeys[fl] {
			// A {go:} key field is proved a string kind: its text must be UTF-8 too.
			body = append(body, validateValue(jen.Qual(outboxPkg, "KeyText").Call(jen.Id(recv).Dot(fl.goName)), &goType{kind: kBuiltin, builtin: "string"}, prefix+fl.wire, nil, 1, false)...)
			continue
		}
		if !needsValidate(fl.t) {
			continue
		}
		enums = enums || hasEnum(fl.t, map[*namedType]bool{})
		strs = strs || hasString(fl.t, map[*namedType]bool{})
		x := jen.Id(recv).Dot(fl.goName)
		if !fl.optional {
			body = append(body, validateValue(x, fl.t, prefix+fl.wire, nil, 1, false)...)
			continue
		}
		// A method call dereferences the pointer itself; other uses need *x.
		v, deref := x.Clone(), fl.t.kind != kNamed
		if deref {
			v = jen.Op("*").Add(x.Clone())
		}
		body = append(body, jen.If(x.Clone().Op("!=").Nil()).Block(validateValue(v, fl.t, prefix+fl.wire, nil, 1, deref)...))
	}
	if len(body) == 0 {
		g.commentf("Validate returns nil: %s has no enum, string or key field to check.", typeName)
		g.f.Func().Params(jen.Id(typeName)).Id("Validate").Params().Error().Block(jen.Return(jen.Nil()))
		g.f.Line()
		return
	}
	var what []string
	if enums {
		what = append(what, "enum fields outside their values")
	}
	if strs || len(nonEmpty) > 0 {
		what = append(what, "strings that are not valid UTF-8 (encoding/json would store U+FFFD instead of their bytes)")
	}
	if len(nonEmpty) > 0 {
		what = append(what, "empty key strings")
	}
	g.commentf("Validate returns every problem with %s: %s.", recv, andList(what))
	all := append([]jen.Code{jen.Var().Id("errs").Index().Error()}, body...)
	all = append(all, jen.Return(jen.Qual("errors", "Join").Call(jen.Id("errs").Op("..."))))
	g.f.Func().Params(jen.Id(recv).Id(typeName)).Id("Validate").Params().Error().Block(all...)
	g.f.Line()
}

// validateValue checks x of type t; label is a format for its path ("items[%d]") with args.
// deref says x is *p, which an index expression needs in parentheses.
func validateValue(x *jen.Statement, t *goType, label string, args []jen.Code, depth int, deref bool) []jen.Code {
	switch t.kind {
	case kNamed:
		fargs := append(append([]jen.Code(nil), args...), jen.Err())
		return []jen.Code{jen.If(jen.Err().Op(":=").Add(x).Dot("Validate").Call(), jen.Err().Op("!=").Nil()).Block(
			appendErr(jen.Qual("fmt", "Errorf").Call(append([]jen.Code{jen.Lit(label + ": %w")}, fargs...)...)),
		)}
	case kBuiltin: // a string
		return []jen.Code{jen.If(jen.Op("!").Qual("unicode/utf8", "ValidString").Call(x)).Block(
			appendErr(errorf(label+" is not valid UTF-8", args)),
		)}
	case kSlice:
		i, v := fmt.Sprintf("i%d", depth), fmt.Sprintf("x%d", depth)
		inner := validateValue(jen.Id(v), t.elem, label+"[%d]", append(append([]jen.Code(nil), args...), jen.Id(i)), depth+1, false)
		return []jen.Code{jen.For(jen.List(jen.Id(i), jen.Id(v)).Op(":=").Range().Add(x)).Block(inner...)}
	case kMap:
		// Sorted keys keep the error text the same from run to run.
		k := fmt.Sprintf("k%d", depth)
		kargs := append(append([]jen.Code(nil), args...), jen.Id(k))
		inner := []jen.Code{jen.If(jen.Op("!").Qual("unicode/utf8", "ValidString").Call(jen.Id(k))).Block(
			appendErr(jen.Qual("fmt", "Errorf").Call(append([]jen.Code{jen.Lit(label + ": key %q is not valid UTF-8")}, kargs...)...)),
		)}
		if needsValidate(t.elem) {
			m := x.Clone()
			if deref {
				m = jen.Parens(x.Clone())
			}
			inner = append(inner, validateValue(m.Index(jen.Id(k)), t.elem, label+"[%q]", kargs, depth+1, false)...)
		}
		return []jen.Code{jen.For(jen.List(jen.Id("_"), jen.Id(k)).Op(":=").Range().Qual("slices", "Sorted").Call(jen.Qual("maps", "Keys").Call(x))).Block(inner...)}
	}
	return nil
}

// appendErr is errs = append(errs, err).
func appendErr(err jen.Code) jen.Code {
	return jen.Id("errs").Op("=").Append(jen.Id("errs"), err)
}

// errorf is errors.New(format) without args, else fmt.Errorf(format, args...).
func errorf(format string, args []jen.Code) jen.Code {
	if len(args) == 0 {
		return jen.Qual("errors", "New").Call(jen.Lit(format))
	}
	return jen.Qual("fmt", "Errorf").Call(append([]jen.Code{jen.Lit(format)}, args...)...)
}

// hasEnum and hasString report what Validate checks in a value of t, for its doc comment;
// seen stops at types already looked into (types may refer to each other).
func hasEnum(t *goType, seen map[*namedType]bool) bool {
	switch t.kind {
	case kNamed:
		if t.named.enum {
			return true
		}
		if seen[t.named] {
			return false
		}
		seen[t.named] = true
		for _, fl := range t.named.fields {
			if hasEnum(fl.t, seen) {
				return true
			}
		}
	case kSlice, kMap:
		return hasEnum(t.elem, seen)
	}
	return false
}

func hasString(t *goType, seen map[*namedType]bool) bool {
	switch t.kind {
	case kNamed:
		if t.named.enum || seen[t.named] {
			return false
		}
		seen[t.named] = true
		for _, fl := range t.named.fields {
			if hasString(fl.t, seen) {
				return true
			}
		}
	case kSlice:
		return hasString(t.elem, seen)
	case kMap:
		return true // its keys
	case kBuiltin:
		return t.builtin == "string"
	}
	return false
}

// andList joins items as a sentence does: "a", "a and b", "a, b and c".
func andList(items []string) string { return joinList(items, "and") }

// joinList joins items with commas, and conj before the last.
func joinList(items []string, conj string) string {
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " " + conj + " " + items[len(items)-1]
}
