package gen

import (
	"fmt"

	"github.com/dave/jennifer/jen"
)

// genEnqueue emits EnqueueX: validate, marshal, insert into the caller's transaction.
func (g *emitter) genEnqueue(e *event) {
	doc := fmt.Sprintf("Enqueue%s validates e and inserts it into outbox_messages on tx, the caller's\ntransaction: workers see it only after the caller commits, and it is gone if the caller\nrolls back. It never begins, commits or rolls back a transaction itself.", e.goName)
	if len(e.orderingKey) > 0 {
		doc += "\n\nThe message takes its place in its key's order (see OrderingKey) when tx commits. Until tx ends, the key stays locked: another transaction enqueueing a message of the same key waits for this one to commit or roll back, which is what makes the order follow commit order. Keep the enqueue late in a short transaction, and take it and your own row locks in the same order on every code path, or two transactions can deadlock (docs/ordering.md in the outboxgen repository)."
	}
	msg := messageFields(e)
	g.comment(doc)
	g.f.Func().Id("Enqueue"+e.goName).Params(
		jen.Id("ctx").Qual("context", "Context"),
		jen.Id("tx").Qual(outboxPkg, "DBTX"),
		jen.Id("e").Id(e.goName),
		jen.Id("opts").Op("...").Qual(outboxPkg, "EnqueueOption"),
	).Params(jen.Qual(outboxPkg, "MessageID"), jen.Error()).Block(
		jen.If(jen.Err().Op(":=").Id("e").Dot("Validate").Call(), jen.Err().Op("!=").Nil()).Block(
			jen.Return(jen.Lit(0), jen.Err()),
		),
		jen.List(jen.Id("payload"), jen.Err()).Op(":=").Qual("encoding/json", "Marshal").Call(jen.Id("e")),
		jen.If(jen.Err().Op("!=").Nil()).Block(
			jen.Return(jen.Lit(0), jen.Qual("fmt", "Errorf").Call(jen.Lit(e.wire+": encode payload: %w"), jen.Err())),
		),
		jen.Return(jen.Qual(outboxPkg, "Enqueue").Call(jen.Id("ctx"), jen.Id("tx"), jen.Qual(outboxPkg, "Message").Values(msg...), jen.Id("opts").Op("..."))),
	)
	g.f.Line()
}

// messageFields are the fields of the outbox.Message that carries e, a payload value named e
// whose JSON is in payload.
func messageFields(e *event) []jen.Code {
	msg := []jen.Code{
		jen.Line().Id("EventType").Op(":").Id("e").Dot("EventType").Call(),
		jen.Line().Id("Payload").Op(":").Id("payload"),
		jen.Line().Id("IdempotencyKey").Op(":").Id("e").Dot("IdempotencyKey").Call(),
	}
	if e.policy.maxAttempts > 0 {
		msg = append(msg, jen.Line().Id("MaxAttempts").Op(":").Lit(e.policy.maxAttempts))
	}
	if len(e.orderingKey) > 0 {
		msg = append(msg, jen.Line().Id("OrderingKey").Op(":").Id("e").Dot("OrderingKey").Call())
	}
	return append(msg, jen.Line())
}

// genSend emits SendX for a direct event: the handler runs in-process, the database is never
// touched (a direct event reports that the database is failing).
func (g *emitter) genSend(e *event) {
	attempts := "3 attempts"
	if e.policy.maxAttempts > 0 {
		attempts = fmt.Sprintf("%d attempts", e.policy.maxAttempts)
	}
	timeout := "1m"
	if e.policy.timeout > 0 {
		timeout = shortDuration(e.policy.timeout)
	}
	g.comment(fmt.Sprintf("Send%s validates e and calls h in-process, never touching the database: a direct\nevent must work while the database does not. A failing call is retried (%s,\n100ms to 1s apart) within ctx and the event's timeout (%s).", e.goName, attempts, timeout))
	g.f.Func().Id("Send"+e.goName).Params(
		jen.Id("ctx").Qual("context", "Context"),
		jen.Id("h").Id(e.goName+"Handler"),
		jen.Id("e").Id(e.goName),
	).Error().Block(
		jen.If(jen.Err().Op(":=").Id("e").Dot("Validate").Call(), jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Err())),
		jen.Return(jen.Qual(outboxPkg, "SendDirect").Call(jen.Id("ctx"), policyCode(e.policy), jen.Id("e").Dot("EventType").Call(), jen.Id("e").Dot("IdempotencyKey").Call(),
			jen.Func().Params(jen.Id("ctx").Qual("context", "Context"), jen.Id("d").Qual(outboxPkg, "Delivery")).Error().Block(
				jen.Return(jen.Id("h").Dot("Handle"+e.goName).Call(jen.Id("ctx"), jen.Id("e"), jen.Id("d"))),
			),
		)),
	)
	g.f.Line()
}
