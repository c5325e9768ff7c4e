package gen

import (
	"fmt"
	"slices"
	"strings"

	"github.com/dave/jennifer/jen"
)

// keyString is a string field of a key, which Validate refuses empty; key names the keys it
// is part of.
type keyString struct {
	fl  *field
	key string
}

// keyStrings lists the string fields of e's idempotency key, then those of its ordering key
// that the first does not hold.
func keyStrings(e *event) []keyString {
	var out []keyString
	for _, k := range e.key {
		if isStringKind(k.t) {
			what := "the idempotency key"
			if slices.Contains(e.orderingKey, k) {
				what = "the idempotency key and the ordering key"
			}
			out = append(out, keyString{k, what})
		}
	}
	for _, k := range e.orderingKey {
		if isStringKind(k.t) && !slices.Contains(e.key, k) {
			out = append(out, keyString{k, "the ordering key"})
		}
	}
	return out
}

func isStringKind(t *goType) bool {
	return t.kind == kGo || (t.kind == kBuiltin && t.builtin == "string")
}

func (g *emitter) genIdempotencyKey(e *event) {
	if len(e.key) == 0 {
		if e.direct {
			g.commentf("IdempotencyKey returns \"\": %s has no idempotency_key.", e.wire)
		} else {
			g.commentf("IdempotencyKey returns \"\": %s has no idempotency_key, so handlers see \"msg:<id>\", unique per message.", e.wire)
		}
		g.f.Func().Params(jen.Id(e.goName)).Id("IdempotencyKey").Params().String().Block(jen.Return(jen.Lit("")))
		g.f.Line()
		return
	}
	names := make([]string, len(e.key))
	args := []jen.Code{jen.Lit(e.wire)}
	for i, k := range e.key {
		names[i] = k.wire
		args = append(args, keyValue(jen.Id("e").Dot(k.goName), k.t))
	}
	g.comment(fmt.Sprintf("IdempotencyKey identifies this logical event by %s: %q followed by\n\":<byte length>:<value>\" for each key field, so payloads that differ in a key field\nnever share a key. A key over %d bytes becomes \"sha256:\" and the hex SHA-256 of that text.",
		strings.Join(names, ", "), e.wire, maxKeyLen))
	g.f.Func().Params(jen.Id("e").Id(e.goName)).Id("IdempotencyKey").Params().String().Block(
		jen.Return(jen.Qual(outboxPkg, "IdempotencyKeyOf").Call(args...)),
	)
	g.f.Line()
}

// genOrderingKey emits OrderingKey for an event with an ordering_key.
func (g *emitter) genOrderingKey(e *event) {
	names := make([]string, len(e.orderingKey))
	args := []jen.Code{jen.Lit(e.group)}
	for i, k := range e.orderingKey {
		names[i] = k.wire
		args = append(args, keyValue(jen.Id("e").Dot(k.goName), k.t))
	}
	group := fmt.Sprintf("ordering group %q", e.group)
	if e.groupAt == nil {
		group += " (its wire name: the event has no ordering_group)"
	}
	var others []string
	for _, o := range g.m.groupEvents(e.group) {
		if o != e {
			others = append(others, o.wire)
		}
	}
	shared := ""
	if len(others) > 0 {
		shared = fmt.Sprintf(" %s share%s the group: the messages of one key are ordered together, whichever of these events they are.", andList(others), map[bool]string{true: "s", false: ""}[len(others) == 1])
	}
	g.comment(fmt.Sprintf("OrderingKey puts the message in its key's order: the messages of %s with equal %s are handled one at a time, in the order their enqueuing transactions committed (not in id order), and a failing one holds the later ones back while it is retried, and once FAILED until an operator retries or purges it; messages of other keys run concurrently.%s Handlers see it as Delivery.OrderingKey.\n\n"+
		"The key is %q followed by \":<byte length>:<value>\" for %s, as in IdempotencyKey, so different values never share a key, nor do different groups (a group name has no colon). A key over %d bytes becomes %q and the hex SHA-256 of that text.",
		group, andList(names), shared, e.group, andList(names), maxKeyLen, e.group+":sha256:"))
	g.f.Func().Params(jen.Id("e").Id(e.goName)).Id("OrderingKey").Params().String().Block(
		jen.Return(jen.Qual(outboxPkg, "OrderingKeyOf").Call(args...)),
	)
	g.f.Line()
}

// keyValue renders a key field as text. Times are UTC RFC 3339 with nanoseconds, like the wire.
func keyValue(x *jen.Statement, t *goType) jen.Code {
	switch t.kind {
	case kNamed: // an enum
		return jen.String().Parens(x)
	case kGo: // outbox.KeyText's ~string constraint makes any other kind a compile error
		return jen.Qual(outboxPkg, "KeyText").Call(x)
	}
	switch t.builtin {
	case "bool":
		return jen.Qual("strconv", "FormatBool").Call(x)
	case "int":
		return jen.Qual("strconv", "Itoa").Call(x)
	case "int32":
		return jen.Qual("strconv", "FormatInt").Call(jen.Int64().Parens(x), jen.Lit(10))
	case "int64":
		return jen.Qual("strconv", "FormatInt").Call(x, jen.Lit(10))
	case "uint32":
		return jen.Qual("strconv", "FormatUint").Call(jen.Uint64().Parens(x), jen.Lit(10))
	case "uint64":
		return jen.Qual("strconv", "FormatUint").Call(x, jen.Lit(10))
	case "time":
		return x.Dot("UTC").Call().Dot("Format").Call(jen.Qual("time", "RFC3339Nano"))
	}
	return x
}
