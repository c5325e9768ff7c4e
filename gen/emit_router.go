package gen

import (
	"fmt"

	"github.com/dave/jennifer/jen"
)

// genHandler declares the typed handler interface of an event.
func (g *emitter) genHandler(e *event) {
	g.commentf("%sHandler handles %q events.", e.goName, e.wire)
	method := fmt.Sprintf("Handle%s handles one delivery. Returning nil marks it done; an error retries it\n(outbox.Permanent(err) fails it at once). Delivery is at-least-once: effects that must\nnot repeat check d.IdempotencyKey (outbox.Once).", e.goName)
	if len(e.orderingKey) > 0 {
		method += fmt.Sprintf("\n\nMessages of one ordering key (d.OrderingKey, see %s.OrderingKey) reach it one at a time, in the order they were committed: while one fails and waits for its retry, the later ones of its key wait too.", e.goName)
	}
	if e.direct {
		method = fmt.Sprintf("Handle%s handles one in-process call from Send%s. Returning nil ends it; an error\nis retried a few times within the event's timeout.", e.goName, e.goName)
	}
	g.f.Type().Id(e.goName+"Handler").Interface(
		jen.Comment(commentText(method)),
		jen.Id("Handle"+e.goName).Params(jen.Id("ctx").Qual("context", "Context"), jen.Id("e").Id(e.goName), jen.Id("d").Qual(outboxPkg, "Delivery")).Error(),
	)
	g.f.Line()
}

// genRegister emits RegisterX: the adapter from stored JSON to the typed handler.
func (g *emitter) genRegister(e *event) {
	g.comment(fmt.Sprintf("Register%s routes %q messages to h with %s.\nA payload that does not decode, lacks a field that is not optional, or holds an enum value\noutside the catalog fails permanently and never reaches h (see decode%s); unknown JSON\nfields are ignored, so an older catalog reads rows a newer one wrote.", e.goName, e.wire, describePolicy(e.policy), e.goName))
	g.f.Func().Id("Register"+e.goName).Params(jen.Id("r").Op("*").Qual(outboxPkg, "Router"), jen.Id("h").Id(e.goName+"Handler")).Block(
		jen.Id("r").Dot("Handle").Call(jen.Lit(e.wire), policyCode(e.policy),
			jen.Func().Params(jen.Id("ctx").Qual("context", "Context"), jen.Id("payload").Qual("encoding/json", "RawMessage"), jen.Id("d").Qual(outboxPkg, "Delivery")).Error().Block(
				jen.List(jen.Id("e"), jen.Err()).Op(":=").Id("decode"+e.goName).Call(jen.Id("payload")),
				jen.If(jen.Err().Op("!=").Nil()).Block(
					jen.Return(jen.Qual(outboxPkg, "Permanent").Call(jen.Qual("fmt", "Errorf").Call(jen.Lit(e.wire+": %w"), jen.Err()))),
				),
				jen.Return(jen.Id("h").Dot("Handle"+e.goName).Call(jen.Id("ctx"), jen.Id("e"), jen.Id("d"))),
			),
		),
	)
	g.f.Line()
}

// genRouter emits Handlers and NewRouter over the outbox events.
func (g *emitter) genRouter(events []*event) {
	if len(events) == 0 {
		return
	}
	embeds := make([]jen.Code, len(events))
	regs := []jen.Code{jen.Id("r").Op(":=").Qual(outboxPkg, "NewRouter").Call()}
	for i, e := range events {
		embeds[i] = jen.Id(e.goName + "Handler")
		regs = append(regs, jen.Id("Register"+e.goName).Call(jen.Id("r"), jen.Id("h")))
	}
	regs = append(regs, jen.Return(jen.Id("r")))
	g.comment("Handlers handles every outbox event of the catalog. Giving NewRouter a value that misses\none is a compile error; RegisterX adds a single event to a router of your own.")
	g.f.Type().Id("Handlers").Interface(embeds...)
	g.f.Line()
	g.comment("NewRouter returns a router that sends each outbox event of the catalog to h, with the\ncatalog's retry policy.")
	g.f.Func().Id("NewRouter").Params(jen.Id("h").Id("Handlers")).Op("*").Qual(outboxPkg, "Router").Block(regs...)
	g.f.Line()
}
