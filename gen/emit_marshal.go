package gen

import (
	"github.com/dave/jennifer/jen"
)

// genMarshal emits MarshalJSON when the struct holds times directly: the wire format is UTC
// RFC 3339 with nanoseconds whatever location the caller's values carry. Named struct types
// inside normalise their own fields.
func (g *emitter) genMarshal(recv, typeName string, fs []*field) {
	var body []jen.Code
	for _, fl := range fs {
		if !hasTime(fl.t) {
			continue
		}
		w := jen.Id("w").Dot(fl.goName)
		var conv func(x jen.Code) jen.Code
		if fl.t.kind == kBuiltin {
			conv = func(x jen.Code) jen.Code { return jen.Add(x).Dot("UTC").Call() }
		} else {
			name := g.utcHelper(fl.t)
			conv = func(x jen.Code) jen.Code { return jen.Id(name).Call(x) }
		}
		if fl.optional {
			arg := jen.Op("*").Add(w.Clone())
			if fl.t.kind == kBuiltin {
				arg = w.Clone() // a method call dereferences the pointer itself
			}
			body = append(body, jen.If(w.Clone().Op("!=").Nil()).Block(
				jen.Id("x").Op(":=").Add(conv(arg)),
				w.Clone().Op("=").Op("&").Id("x"),
			))
			continue
		}
		body = append(body, w.Clone().Op("=").Add(conv(w.Clone())))
	}
	if len(body) == 0 {
		return
	}
	g.comment("MarshalJSON writes the wire format: times in UTC, RFC 3339 with nanoseconds,\nwhatever location the values carry.")
	all := []jen.Code{
		jen.Type().Id("wire").Id(typeName).Comment("same fields, no methods: no recursion"),
		jen.Id("w").Op(":=").Id("wire").Parens(jen.Id(recv)),
	}
	all = append(all, body...)
	all = append(all, jen.Return(jen.Qual("encoding/json", "Marshal").Call(jen.Id("w"))))
	g.f.Func().Params(jen.Id(recv).Id(typeName)).Id("MarshalJSON").Params().Params(jen.Index().Byte(), jen.Error()).Block(all...)
	g.f.Line()
}

// utcHelper names the helper that copies a list or map of times into UTC, registering it.
func (g *emitter) utcHelper(t *goType) string {
	name := "utc" + helperSuffix(t)
	if !g.utcSeen[name] {
		g.utcSeen[name] = true
		if t.elem.kind != kBuiltin {
			g.utcHelper(t.elem)
		}
		g.utcHelpers = append(g.utcHelpers, t)
	}
	return name
}

func helperSuffix(t *goType) string {
	switch t.kind {
	case kSlice:
		return "SliceOf" + helperSuffix(t.elem)
	case kMap:
		return "MapOf" + helperSuffix(t.elem)
	}
	return "Time"
}

// genHelpers emits the helpers that depend on the catalog, after every declaration.
func (g *emitter) genHelpers() {
	for _, t := range g.utcHelpers {
		g.genUTCHelper(t)
	}
}

func (g *emitter) genUTCHelper(t *goType) {
	name := "utc" + helperSuffix(t)
	var conv jen.Code
	if t.elem.kind == kBuiltin {
		conv = jen.Id("x").Dot("UTC").Call()
	} else {
		conv = jen.Id("utc" + helperSuffix(t.elem)).Call(jen.Id("x"))
	}
	var mk, loop jen.Code
	if t.kind == kSlice {
		mk = jen.Make(typeCode(t), jen.Len(jen.Id("s")))
		loop = jen.For(jen.List(jen.Id("i"), jen.Id("x")).Op(":=").Range().Id("s")).Block(jen.Id("out").Index(jen.Id("i")).Op("=").Add(conv))
	} else {
		mk = jen.Make(typeCode(t), jen.Len(jen.Id("s")))
		loop = jen.For(jen.List(jen.Id("k"), jen.Id("x")).Op(":=").Range().Id("s")).Block(jen.Id("out").Index(jen.Id("k")).Op("=").Add(conv))
	}
	g.commentf("%s returns a copy of s with every time in UTC (nil stays nil, the wire's null).", name)
	g.f.Func().Id(name).Params(jen.Id("s").Add(typeCode(t))).Add(typeCode(t)).Block(
		jen.If(jen.Id("s").Op("==").Nil()).Block(jen.Return(jen.Nil())),
		jen.Id("out").Op(":=").Add(mk),
		loop,
		jen.Return(jen.Id("out")),
	)
	g.f.Line()
}
