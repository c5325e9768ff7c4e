package gen

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// This file compares two versions of a catalog, the way outboxgen breaking does in CI: every
// change that breaks rows already stored (the new catalog's decoder refuses what the old one's
// Enqueue wrote) or their consumers (something they read is taken away or changes meaning) is
// reported at its place in the new catalog. Both versions go through the whole pipeline up to
// the model, so types are compared as the wire sees them, not as they are spelled.
//
// Breaking:
//   - an outbox event removed (a renamed wire name is a removal and an addition): its pending
//     rows are never claimed again, its consumers stop receiving it;
//   - delivery changed (outbox to direct, or direct to outbox);
//   - a field removed, in an event or in a type that a payload holds;
//   - a new field that is not optional: rows stored without it fail to decode;
//   - a field made required (optional: true removed);
//   - a field's type changed, unless every old value decodes as the new type (below);
//   - an enum value removed;
//   - idempotency_key changed or removed (adding one where there was none is safe: the old
//     messages' msg:<id> keys matched nothing anyway);
//   - ordering_key added, changed (other fields, or the same in another order) or removed, and
//     the ordering group changed (ordering_group set, changed or removed, unless the group
//     stays the same: the default is the event's wire name). The keys of new messages change,
//     so old and new messages of one aggregate are no longer ordered together: an added key
//     leaves the pending messages without one, a removed key hands new ones out concurrently.
//     runtime/outboxkafka's record key (the ordering key, else the idempotency key) changes
//     too, and with it the partition.
//
// Safe: a new event (ordered or not, in a group of its own or an existing one); a new optional field; a new enum value; descriptions; max_attempts,
// backoff and timeout; field order; a direct event's payload (never stored, never relayed:
// the compiler checks its callers); a field made optional; and these type changes, which
// every stored value survives:
//
//	int32            -> int, int64, float64
//	uint32           -> int, int64, uint64, float64
//	int <-> int64    (int is 64 bits wide wherever the runtime runs)
//	an enum          -> string, or an enum with at least its values
//	anything         -> json
//	a struct type    -> a struct type whose fields compare safely (the type's name is not on the wire)
//	[]T, map[string]T -> []U, map[string]U when T -> U is safe
//
// A widening is safe for stored rows, not for readers still on the old catalog: workers of the
// previous deploy, and consumers built from the old AsyncAPI document, refuse a value the old
// type cannot hold (a new enum value, an int64 over the int32 range, a null in a field that was
// required). Deploy the readers first, then start writing such values.
//
// Not on the wire, so not compared: a field's Go name (go_name), which the compiler checks.
//
// Each change has an id (BreakingChange.ID) by which a team accepts one it means to make
// (accept.go).

// BreakingReport is what Breaking found.
type BreakingReport struct {
	// Changes are the breaking changes that no acceptance matched, each at a position in the
	// new catalog, in file order: each fails the comparison.
	Changes ErrorList
	// All are every breaking change found, accepted or not, in file order, with their ids.
	All []BreakingChange
	// Stale are the accept_breaking: entries added in the new catalog that match no change;
	// StaleFlags the same for the ids given to Breaking. Each fails the comparison.
	Stale      ErrorList
	StaleFlags []string
	// Compared counts the outbox events both versions declare; Added the new catalog's others.
	Compared, Added int
}

// BreakingChange is one breaking change: where and what, its id, and the acceptance that
// matched it, if one did.
type BreakingChange struct {
	*Error
	// ID names the change in accept_breaking: (and --accept): what changed, in wire names,
	// without the position or the text of the message, so it stays the same while the catalog
	// around it is edited. Examples: "event order_placed field note removed", "type money field
	// amount type changed", "type status enum value \"shipped\" removed".
	ID       string
	Accepted *Acceptance
}

// Failed reports whether the comparison fails: a change no acceptance matched, or a stale
// acceptance.
func (r *BreakingReport) Failed() bool {
	return len(r.Changes) > 0 || len(r.Stale) > 0 || len(r.StaleFlags) > 0
}

// AgainstError is an invalid catalog given as the version to compare against: its problems,
// named as that version was (origin/main:events.yaml:3:5: ...).
type AgainstError struct{ List ErrorList }

func (e *AgainstError) Error() string { return e.List.Error() }

// Breaking compares the catalog src, named catalogPath as in Generate, with an earlier
// version old, named oldName in messages (a path, or a git revision and path). An invalid src
// gives its ErrorList, as Check does; an invalid old gives an *AgainstError. {go:} key types
// of both versions are looked up from catalogPath's directory. A change whose id is in accept,
// or in an accept_breaking: entry src adds (accept.go), is accepted.
func Breaking(catalogPath string, src []byte, oldName string, old []byte, accept ...string) (*BreakingReport, error) {
	nm, err := parse(catalogPath, src)
	if err != nil {
		return nil, err
	}
	om, err := parseIn(oldName, filepath.Dir(catalogPath), old)
	if err != nil {
		var list ErrorList
		if errors.As(err, &list) {
			return nil, &AgainstError{list}
		}
		return nil, err
	}
	b := &breaker{ps: &problems{path: catalogPath, lines: lineCount(src)}, oldName: oldName, seen: map[[2]*namedType]bool{}, ids: map[*Error]string{}}
	rep := b.compare(om, nm)
	b.ps.list.sort()
	for _, e := range b.ps.list {
		rep.All = append(rep.All, BreakingChange{Error: e, ID: b.ids[e]})
	}
	b.accept(rep, om, nm, accept)
	return rep, nil
}

type breaker struct {
	ps      *problems
	oldName string
	seen    map[[2]*namedType]bool // named types compared already: (old, new)
	ids     map[*Error]string      // each change's id
}

// add reports a breaking change at p, with its id.
func (b *breaker) add(p pos, id, format string, args ...any) {
	b.ps.add(p, format, args...)
	b.ids[b.ps.list[len(b.ps.list)-1]] = id
}

func (b *breaker) oldLine(p pos) string { return fmt.Sprintf("line %d of %s", p.line, b.oldName) }

func (b *breaker) compare(om, nm *file) *BreakingReport {
	rep := &BreakingReport{}
	newEvents := map[string]*event{}
	for _, e := range nm.events {
		newEvents[e.wire] = e
	}
	oldEvents := map[string]*event{}
	for _, oe := range om.events {
		oldEvents[oe.wire] = oe
		ne := newEvents[oe.wire]
		switch {
		case ne == nil && oe.direct:
			// Never stored, never relayed: its callers fail to compile.
		case ne == nil:
			b.add(nm.eventsAt, "event "+oe.wire+" removed", "event %q removed (%s): its pending rows are never claimed again (they stay PENDING), and its consumers stop receiving it; drain it first (outboxgen status shows none pending), or keep it", oe.wire, b.oldLine(oe.at))
		case oe.direct != ne.direct:
			at := ne.at
			if ne.deliveryAt != nil {
				at = *ne.deliveryAt
			}
			if ne.direct {
				b.add(at, "event "+ne.wire+" delivery changed to direct", "event %q: delivery changed from outbox to direct: its pending rows are never claimed again, and relays and their consumers stop receiving it", ne.wire)
			} else {
				b.add(at, "event "+ne.wire+" delivery changed to outbox", "event %q: delivery changed from direct to outbox: it is now stored and relayed, callers of Send%s must enqueue it in a transaction, and a worker must handle it", ne.wire, ne.goName)
			}
		case oe.direct:
			// A direct payload is never stored nor relayed: the compiler checks its callers.
		default:
			rep.Compared++
			b.key(oe, ne)
			b.ordering(oe, ne)
			b.fields(fmt.Sprintf("event %q", ne.wire), "event "+ne.wire, ne.at, oe.fields, ne.fields)
		}
	}
	for _, ne := range nm.events {
		if oldEvents[ne.wire] == nil && !ne.direct {
			rep.Added++
		}
	}
	return rep
}

func keyNames(e *event) []string {
	var out []string
	for _, k := range e.key {
		out = append(out, k.wire)
	}
	return out
}

func (b *breaker) key(oe, ne *event) {
	ok, nk := keyNames(oe), keyNames(ne)
	if len(ok) == 0 || slices.Equal(ok, nk) {
		return
	}
	at := ne.at
	if ne.keyAt != nil {
		at = *ne.keyAt
	}
	if len(nk) == 0 {
		b.add(at, "event "+ne.wire+" idempotency_key removed", "event %q: idempotency_key [%s] removed (%s): new messages get msg:<id> keys, so deduplication by key (outbox.Once, JetStream's Nats-Msg-Id) no longer recognises a logical event sent twice", ne.wire, strings.Join(ok, ", "), b.oldLine(*oe.keyAt))
		return
	}
	b.add(at, "event "+ne.wire+" idempotency_key changed", "event %q: idempotency_key changed from [%s] to [%s] (%s): new messages of a logical event get another key than its pending ones, so outbox.Once and JetStream's duplicate window no longer match them", ne.wire, strings.Join(ok, ", "), strings.Join(nk, ", "), b.oldLine(*oe.keyAt))
}

func orderingNames(e *event) []string {
	var out []string
	for _, k := range e.orderingKey {
		out = append(out, k.wire)
	}
	return out
}

// groupText names the ordering group of an ordered event, saying when it is the default.
func groupText(e *event) string {
	if e.groupAt == nil {
		return fmt.Sprintf("%q (the default, its wire name)", e.group)
	}
	return fmt.Sprintf("%q", e.group)
}

// ordering compares the ordering key and group of an outbox event both versions declare.
func (b *breaker) ordering(oe, ne *event) {
	ok, nk := orderingNames(oe), orderingNames(ne)
	switch {
	case len(ok) == 0 && len(nk) == 0:
		return
	case len(ok) == 0:
		b.add(*ne.orderingAt, "event "+ne.wire+" ordering_key added", "event %q: ordering_key [%s] added: the messages pending from before have no ordering key, so a new message of an aggregate can be handled before or beside an older one, and runtime/outboxkafka's record key becomes the ordering key (another partition than the aggregate's older records); drain the event first (outboxgen status shows none pending)", ne.wire, strings.Join(nk, ", "))
		return
	case len(nk) == 0:
		b.add(ne.at, "event "+ne.wire+" ordering_key removed", "event %q: ordering_key [%s] removed (%s): new messages are no longer handled one at a time in commit order, neither with each other nor with the pending messages of their key, and runtime/outboxkafka's record key becomes the idempotency key (another partition)", ne.wire, strings.Join(ok, ", "), b.oldLine(*oe.orderingAt))
		return
	}
	const apart = "new messages get other keys than the pending ones of the same aggregate, so old and new messages are no longer ordered together, and their Kafka records (keyed by the ordering key) go to other partitions"
	if !slices.Equal(ok, nk) {
		b.add(*ne.orderingAt, "event "+ne.wire+" ordering_key changed", "event %q: ordering_key changed from [%s] to [%s] (%s): %s", ne.wire, strings.Join(ok, ", "), strings.Join(nk, ", "), b.oldLine(*oe.orderingAt), apart)
	}
	if oe.group != ne.group {
		at, oldAt := *ne.orderingAt, *oe.orderingAt
		if ne.groupAt != nil {
			at = *ne.groupAt
		}
		if oe.groupAt != nil {
			oldAt = *oe.groupAt
		}
		b.add(at, "event "+ne.wire+" ordering_group changed", "event %q: ordering group changed from %s to %s (%s): %s", ne.wire, groupText(oe), groupText(ne), b.oldLine(oldAt), apart)
	}
}

// fields compares the fields of an event or a struct type; what names it in messages, id in
// change ids, owner is where a removed field is reported (the event's or the type's name).
func (b *breaker) fields(what, id string, owner pos, ofs, nfs []*field) {
	newFields := map[string]*field{}
	for _, f := range nfs {
		newFields[f.wire] = f
	}
	oldFields := map[string]*field{}
	for _, of := range ofs {
		oldFields[of.wire] = of
		nf := newFields[of.wire]
		if nf == nil {
			why := "consumers that read it get nothing from new rows"
			if !of.optional {
				why = "workers still on the old catalog refuse new rows without it, and consumers lose it"
			}
			b.add(owner, id+" field "+of.wire+" removed", "%s: field %q removed (%s): %s", what, of.wire, b.oldLine(of.at), why)
			continue
		}
		fwhat := fmt.Sprintf("%s: field %q", what, nf.wire)
		fid := id + " field " + nf.wire
		if of.optional && !nf.optional {
			b.add(nf.at, fid+" made required", "%s is no longer optional: stored rows where it is null, or that were written before it existed, fail to decode", fwhat)
		}
		if !b.compatible(fwhat, fid, of.t, nf.t) {
			b.add(nf.typeAt, fid+" type changed", "%s: type changed from %s to %s (%s): stored values may not decode as %s", fwhat, typeText(of.t), typeText(nf.t), b.oldLine(of.typeAt), typeText(nf.t))
		}
	}
	for _, nf := range nfs {
		if oldFields[nf.wire] == nil && !nf.optional {
			b.add(nf.at, id+" field "+nf.wire+" added as required", "%s: new field %q is required: rows stored without it fail to decode (missing); declare it optional: true", what, nf.wire)
		}
	}
}

// widens lists the safe changes between builtin types: every value of the key decodes
// exactly as each type of its value.
var widens = map[string][]string{
	"int32":  {"int", "int64", "float64"},
	"uint32": {"int", "int64", "uint64", "float64"},
	"int":    {"int64"},
	"int64":  {"int"},
}

// compatible reports whether every stored value of ot decodes as nt. Changes inside named
// types (a removed enum value, a struct's field) are reported by named, at those types.
func (b *breaker) compatible(what, id string, ot, nt *goType) bool {
	if nt.kind == kBuiltin && nt.builtin == "json" {
		return true
	}
	switch {
	case ot.kind == kNamed && nt.kind == kNamed:
		if ot.named.enum != nt.named.enum {
			return false
		}
		b.named(what, id, ot.named, nt.named)
		return true
	case ot.kind == kNamed && ot.named.enum:
		return nt.kind == kBuiltin && nt.builtin == "string"
	case ot.kind != nt.kind:
		return false
	case ot.kind == kSlice, ot.kind == kMap:
		return b.compatible(what, id, ot.elem, nt.elem)
	case ot.kind == kGo:
		return ot.path == nt.path && ot.name == nt.name
	}
	return ot.builtin == nt.builtin || slices.Contains(widens[ot.builtin], nt.builtin)
}

// named compares two structs or two enums, once per pair. A type from types: reports at its
// own name; an inline enum at the field that declares it (what, id).
func (b *breaker) named(what, id string, ot, nt *namedType) {
	pair := [2]*namedType{ot, nt}
	if b.seen[pair] {
		return
	}
	b.seen[pair] = true
	if !nt.inline {
		what = fmt.Sprintf("type %q", nt.wire)
		id = "type " + nt.wire
	}
	if !nt.enum {
		b.fields(what, id, nt.at, ot.fields, nt.fields)
		return
	}
	for _, ov := range ot.values {
		if !slices.ContainsFunc(nt.values, func(v enumValue) bool { return v.wire == ov.wire }) {
			b.add(nt.at, fmt.Sprintf("%s enum value %q removed", id, ov.wire), "%s: enum value %q removed (%s): stored rows that hold it fail to decode", what, ov.wire, b.oldLine(ov.at))
		}
	}
}

// typeText writes a type as the catalog does: int64, []line, map[string]time, enum, {go: ...}.
func typeText(t *goType) string {
	switch t.kind {
	case kNamed:
		if t.named.inline {
			return "enum"
		}
		return t.named.wire
	case kSlice:
		return "[]" + typeText(t.elem)
	case kMap:
		return "map[string]" + typeText(t.elem)
	case kGo:
		return fmt.Sprintf("{go: %s.%s}", t.path, t.name)
	}
	return t.builtin
}
