package gen

import (
	"fmt"

	"github.com/dave/jennifer/jen"
)

// genDecodeMethod emits DecodeOutboxPayload, the exported face of decodeX on the payload's
// pointer: the test kit (runtime/outboxtest) finds it through an interface, so the generated
// code needs no import of package testing.
func (g *emitter) genDecodeMethod(e *event) {
	g.comment(fmt.Sprintf("DecodeOutboxPayload sets *e to a stored %s payload, decoded and checked exactly as\nRegister%s does before calling its handler (see decode%s). On an error *e is\nunchanged. runtime/outboxtest reads enqueued messages with it.", e.wire, e.goName, e.goName))
	g.f.Func().Params(jen.Id("e").Op("*").Id(e.goName)).Id("DecodeOutboxPayload").Params(jen.Id("payload").Index().Byte()).Error().Block(
		jen.List(jen.Id("v"), jen.Err()).Op(":=").Id("decode"+e.goName).Call(jen.Id("payload")),
		jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Err())),
		jen.Op("*").Id("e").Op("=").Id("v"),
		jen.Return(jen.Nil()),
	)
	g.f.Line()
}
