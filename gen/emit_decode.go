package gen

import (
	"fmt"

	"github.com/dave/jennifer/jen"
)

// genDecode emits decodeX: json.Unmarshal, then the checks json.Unmarshal does not make.
func (g *emitter) genDecode(e *event) {
	g.comment(fmt.Sprintf("decode%s decodes a stored %s payload for its handler. Beyond json.Unmarshal,\nit fails a payload that no Enqueue%s of this catalog wrote: a field that is not optional\nis missing (renamed in the catalog while the row was pending) or null, or an enum holds a\nvalue the catalog does not list. Optional fields may be absent or null; unknown fields are\nignored.", e.goName, e.wire, e.goName))
	g.f.Func().Id("decode"+e.goName).Params(jen.Id("payload").Qual("encoding/json", "RawMessage")).Params(jen.Id(e.goName), jen.Error()).Block(
		jen.Var().Id("e").Id(e.goName),
		jen.If(jen.Err().Op(":=").Qual("encoding/json", "Unmarshal").Call(jen.Id("payload"), jen.Op("&").Id("e")), jen.Err().Op("!=").Nil()).Block(
			jen.Return(jen.Id("e"), jen.Qual("fmt", "Errorf").Call(jen.Lit("decode payload: %w"), jen.Err())),
		),
		jen.Id("c").Op(":=").Op("&").Qual(outboxPkg, "PayloadCheck").Values(),
		g.objectCheck(jen.Lit(""), jen.Id("payload"), e.fields),
		jen.Return(jen.Id("e"), jen.Id("c").Dot("Err").Call()),
	)
	g.f.Line()
}

// genCheckJSON emits checkXJSON for a struct type that stored payloads hold.
func (g *emitter) genCheckJSON(t *namedType) {
	g.commentf("check%sJSON records in c what is wrong with a stored %q object at path (see outbox.PayloadCheck).", t.goName, t.wire)
	g.f.Func().Id("check"+t.goName+"JSON").Params(jen.Id("c").Op("*").Qual(outboxPkg, "PayloadCheck"), jen.Id("path").String(), jen.Id("raw").Qual("encoding/json", "RawMessage")).Block(
		g.objectCheck(jen.Id("path"), jen.Id("raw"), t.fields),
	)
	g.f.Line()
}

// objectCheck checks the fields fs of the object raw at path: if o, ok := c.Object(...); ok {...}.
func (g *emitter) objectCheck(path, raw jen.Code, fs []*field) jen.Code {
	var stmts []jen.Code
	for _, fl := range fs {
		stmts = append(stmts, g.fieldCheck(fl)...)
	}
	if len(stmts) == 0 {
		return jen.Id("c").Dot("Object").Call(path, raw) // a struct without fields is still not null
	}
	return jen.If(jen.List(jen.Id("o"), jen.Id("ok")).Op(":=").Id("c").Dot("Object").Call(path, raw), jen.Id("ok")).Block(stmts...)
}

// fieldCheck checks one field of o: present unless optional, not null unless Enqueue writes
// null for it, and its value when it holds structs or enums.
func (g *emitter) fieldCheck(fl *field) []jen.Code {
	method := "Required"
	switch {
	case fl.optional:
		method = "Optional"
		if !needsWireCheck(fl.t) {
			return nil
		}
	case nullOnWire(fl.t):
		method = "Nullable"
	}
	get := jen.Id("o").Dot(method).Call(jen.Lit(fl.wire))
	if !needsWireCheck(fl.t) {
		return []jen.Code{get}
	}
	return []jen.Code{jen.If(jen.Id("v").Op(":=").Add(get), jen.Id("v").Op("!=").Nil()).Block(
		g.valueCheck(jen.Id("o").Dot("Path").Call(jen.Lit(fl.wire)), jen.Id("v"), fl.t, 1)...,
	)}
}

// valueCheck checks the stored value raw at path, of type t (which needsWireCheck).
func (g *emitter) valueCheck(path, raw jen.Code, t *goType, depth int) []jen.Code {
	switch t.kind {
	case kNamed:
		if t.named.enum {
			args := []jen.Code{path, raw}
			for _, v := range t.named.values {
				args = append(args, jen.Lit(v.wire))
			}
			return []jen.Code{jen.Id("c").Dot("Enum").Call(args...)}
		}
		return []jen.Code{jen.Id("check"+t.named.goName+"JSON").Call(jen.Id("c"), path, raw)}
	case kSlice, kMap:
		items := "PayloadList"
		if t.kind == kMap {
			items = "PayloadMap"
		}
		x := fmt.Sprintf("x%d", depth)
		return []jen.Code{jen.For(jen.List(jen.Id("_"), jen.Id(x)).Op(":=").Range().Qual(outboxPkg, items).Call(path, raw)).Block(
			g.valueCheck(jen.Id(x).Dot("Path"), jen.Id(x).Dot("Raw"), t.elem, depth+1)...,
		)}
	}
	return nil
}
