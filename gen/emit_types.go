package gen

import (
	"fmt"
	"strings"

	"github.com/dave/jennifer/jen"
)

// typeCode is the Go type of a field's value (without the optional pointer).
func typeCode(t *goType) jen.Code {
	switch t.kind {
	case kNamed:
		return jen.Id(t.named.goName)
	case kSlice:
		return jen.Index().Add(typeCode(t.elem))
	case kMap:
		return jen.Map(jen.String()).Add(typeCode(t.elem))
	case kGo:
		return jen.Qual(t.path, t.name)
	}
	switch t.builtin {
	case "time":
		return jen.Qual("time", "Time")
	case "duration":
		return jen.Qual("time", "Duration")
	case "bytes":
		return jen.Index().Byte()
	case "json":
		return jen.Qual("encoding/json", "RawMessage")
	}
	return jen.Id(t.builtin)
}

func fieldCode(fl *field) jen.Code {
	s := jen.Id(fl.goName)
	if fl.optional {
		s.Op("*")
	}
	s.Add(typeCode(fl.t)).Tag(map[string]string{"json": fl.wire})
	if fl.doc != "" {
		return jen.Comment(commentText(fl.doc)).Line().Add(s)
	}
	return s
}

func structFields(fs []*field) []jen.Code {
	out := make([]jen.Code, len(fs))
	for i, fl := range fs {
		out[i] = fieldCode(fl)
	}
	return out
}

// genType declares a struct or an enum from types:.
func (g *emitter) genType(t *namedType) {
	if t.enum {
		g.genEnum(t)
		return
	}
	g.comment(doc(fmt.Sprintf("%s is the %q type of the catalog.", t.goName, t.wire), t.doc))
	g.f.Type().Id(t.goName).Struct(structFields(t.fields)...)
	g.f.Line()
	g.genValidate("v", t.goName, "", t.fields, nil)
	g.genMarshal("v", t.goName, t.fields)
	if t.decoded {
		g.genCheckJSON(t)
	}
}

// genEnum declares a string type with one constant per value and a Validate method.
func (g *emitter) genEnum(t *namedType) {
	first := fmt.Sprintf("%s is the %q enum of the catalog.", t.goName, t.wire)
	if strings.Contains(t.wire, ".") {
		first = fmt.Sprintf("%s is the enum of field %q.", t.goName, t.wire)
	}
	g.comment(doc(first, t.doc))
	g.f.Type().Id(t.goName).String()
	g.f.Line()
	g.commentf("Values of %s.", t.goName)
	defs := make([]jen.Code, len(t.values))
	cases := make([]jen.Code, len(t.values))
	wires := make([]string, len(t.values))
	for i, v := range t.values {
		defs[i] = jen.Id(t.goName + v.goName).Id(t.goName).Op("=").Lit(v.wire)
		cases[i] = jen.Id(t.goName + v.goName)
		wires[i] = v.wire
	}
	g.f.Const().Defs(defs...)
	g.f.Line()
	g.commentf("Validate returns an error unless v is one of the values of %s.", t.goName)
	g.f.Func().Params(jen.Id("v").Id(t.goName)).Id("Validate").Params().Error().Block(
		jen.Switch(jen.Id("v")).Block(jen.Case(cases...).Block(jen.Return(jen.Nil()))),
		jen.Return(jen.Qual("fmt", "Errorf").Call(jen.Lit(fmt.Sprintf("invalid %s %%q (want %s)", t.goName, orList(wires))), jen.String().Parens(jen.Id("v")))),
	)
	g.f.Line()
}

// orList joins vals as a sentence does: "a", "a or b", "a, b or c".
func orList(vals []string) string { return joinList(vals, "or") }

// genPayload declares an event's payload struct and its EventType, IdempotencyKey, Validate
// and (when it holds times) MarshalJSON methods.
func (g *emitter) genPayload(e *event) {
	what := "outbox"
	if e.direct {
		what = "direct"
	}
	g.comment(doc(fmt.Sprintf("%s is the payload of the %q event (delivery: %s).", e.goName, e.wire, what), e.doc))
	g.f.Type().Id(e.goName).Struct(structFields(e.fields)...)
	g.f.Line()

	if e.direct {
		g.commentf("EventType returns %q, the wire name handlers see in Delivery.EventType. It never changes with Go names.", e.wire)
	} else {
		g.commentf("EventType returns %q, the wire name stored with the message. It never changes with Go names.", e.wire)
	}
	g.f.Func().Params(jen.Id(e.goName)).Id("EventType").Params().String().Block(jen.Return(jen.Lit(e.wire)))
	g.f.Line()

	g.genIdempotencyKey(e)
	if len(e.orderingKey) > 0 {
		g.genOrderingKey(e)
	}
	g.genValidate("e", e.goName, e.wire+": ", e.fields, keyStrings(e))
	g.genMarshal("e", e.goName, e.fields)
}
