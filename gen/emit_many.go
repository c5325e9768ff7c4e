package gen

import (
	"fmt"

	"github.com/dave/jennifer/jen"
)

// genEnqueueMany emits EnqueueManyX: validate and marshal every payload, naming the index of a
// bad one, then one outbox.EnqueueMany call.
func (g *emitter) genEnqueueMany(e *event) {
	doc := fmt.Sprintf("EnqueueMany%s validates every element of es, then inserts them all into outbox_messages on tx\nin a few multi-row statements (outbox.EnqueueMany), and returns their ids in the order of es.\nAn invalid element is an error naming it as es[i], and then nothing is written. On the\ncaller's transaction the messages commit or roll back with it; for a backfill on a pool, pass\noutbox.Standalone().", e.goName)
	if len(e.orderingKey) > 0 {
		doc += "\n\nMessages of one key take their places in the key's order in the order of es. Until tx ends, their keys stay locked, as Enqueue" + e.goName + " says."
	}
	g.comment(doc)
	g.f.Func().Id("EnqueueMany"+e.goName).Params(
		jen.Id("ctx").Qual("context", "Context"),
		jen.Id("tx").Qual(outboxPkg, "DBTX"),
		jen.Id("es").Index().Id(e.goName),
		jen.Id("opts").Op("...").Qual(outboxPkg, "EnqueueOption"),
	).Params(jen.Index().Qual(outboxPkg, "MessageID"), jen.Error()).Block(
		jen.Id("ms").Op(":=").Make(jen.Index().Qual(outboxPkg, "Message"), jen.Len(jen.Id("es"))),
		jen.For(jen.List(jen.Id("i"), jen.Id("e")).Op(":=").Range().Id("es")).Block(
			jen.If(jen.Err().Op(":=").Id("e").Dot("Validate").Call(), jen.Err().Op("!=").Nil()).Block(
				jen.Return(jen.Nil(), jen.Qual("fmt", "Errorf").Call(jen.Lit("es[%d]: %w"), jen.Id("i"), jen.Err())),
			),
			jen.List(jen.Id("payload"), jen.Err()).Op(":=").Qual("encoding/json", "Marshal").Call(jen.Id("e")),
			jen.If(jen.Err().Op("!=").Nil()).Block(
				jen.Return(jen.Nil(), jen.Qual("fmt", "Errorf").Call(jen.Lit("es[%d]: "+e.wire+": encode payload: %w"), jen.Id("i"), jen.Err())),
			),
			jen.Id("ms").Index(jen.Id("i")).Op("=").Qual(outboxPkg, "Message").Values(messageFields(e)...),
		),
		jen.Return(jen.Qual(outboxPkg, "EnqueueMany").Call(jen.Id("ctx"), jen.Id("tx"), jen.Id("ms"), jen.Id("opts").Op("..."))),
	)
	g.f.Line()
}
