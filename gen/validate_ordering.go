package gen

import (
	"fmt"
	"strings"
)

// maxGroupLen is the longest ordering group: a hashed ordering key is the group, ":sha256:"
// and 64 hex digits, and must fit the 191-byte ordering_key column.
const maxGroupLen = maxKeyLen - len(":sha256:") - 64

// orderedEvent is an event with a valid ordering key, for the check that the events of one
// group agree on the key's types.
type orderedEvent struct {
	e     *eventDecl
	types []string
}

// ordering checks ordering_key and ordering_group, and files the event under its group.
func (v *validator) ordering(e *eventDecl, what string, direct bool, byName map[string]*fieldDecl, names []string) {
	if direct && (e.orderingKeyPos != nil || e.orderingGroup != nil) {
		// ordering_key is looked at first: with it set, ordering_group may be absent (nil).
		var at pos
		keys := "ordering_key"
		if e.orderingKeyPos != nil {
			at = *e.orderingKeyPos
			if e.orderingGroup != nil {
				keys += " and ordering_group"
			}
		} else {
			at, keys = e.orderingGroup.p, "ordering_group"
		}
		v.ps.add(at, "%s: a delivery: direct event cannot be ordered: SendX calls its handler at once, in-process, and stores nothing to keep in order; remove %s, or deliver it through the outbox", what, keys)
		return
	}
	if e.orderingKeyPos == nil {
		if e.orderingGroup != nil {
			v.ps.add(e.orderingGroup.p, "%s: ordering_group without ordering_key: a group orders the messages of equal key values; add ordering_key: [fields], or remove ordering_group", what)
		}
		return
	}
	fields, ok := v.keyFields(what, "ordering_key", e.orderingKey, *e.orderingKeyPos, byName, names)
	group, at := e.name.v, *e.orderingKeyPos
	if e.orderingGroup != nil {
		group, at = e.orderingGroup.v, e.orderingGroup.p
		if !wireNameRe.MatchString(group) {
			suggest := ""
			if low := strings.ToLower(strings.NewReplacer(" ", "_", "-", "_").Replace(group)); wireNameRe.MatchString(low) {
				suggest = fmt.Sprintf(" (did you mean %q?)", low)
			}
			v.ps.add(at, "%s: ordering_group %q: invalid name: use [a-z][a-z0-9_.]*, as for wire names%s", what, group, suggest)
			return
		}
	}
	if len(group) > maxGroupLen {
		fix := "shorten it"
		if e.orderingGroup == nil {
			fix = "set a shorter ordering_group"
		}
		v.ps.add(at, "%s: ordering group %q is %d bytes, more than %d: a long key is hashed to the group, \":sha256:\" and 64 hex digits, which must fit the 191-byte ordering_key column; %s", what, group, len(group), maxGroupLen, fix)
		return
	}
	if !ok {
		return // its own errors say what is wrong with its key
	}
	types := make([]string, len(fields))
	for i, f := range fields {
		types[i] = keyTypeText(f)
	}
	if _, seen := v.groups[group]; !seen {
		v.groupOrder = append(v.groupOrder, group)
	}
	v.groups[group] = append(v.groups[group], orderedEvent{e, types})
}

// orderingGroups reports the events of a group whose key fields differ in number or type from
// another event's of the group: on each such event, naming the first event of every other
// shape. Keys of one aggregate must be equal for equal values, whichever event carries them.
func (v *validator) orderingGroups() {
	for _, group := range v.groupOrder {
		evs := v.groups[group]
		for _, ev := range evs {
			var others []string
			shapes := map[string]bool{strings.Join(ev.types, ", "): true}
			for _, o := range evs {
				shape := strings.Join(o.types, ", ")
				if shapes[shape] {
					continue
				}
				shapes[shape] = true
				others = append(others, fmt.Sprintf("by (%s) in event %q (line %d)", shape, o.e.name.v, o.e.name.p.line))
			}
			if len(others) == 0 {
				continue
			}
			v.ps.add(*ev.e.orderingKeyPos, "event %q: ordering group %q is keyed %s, but by (%s) here; the events of a group need key fields of the same types in the same order, so that one aggregate gets one key", ev.e.name.v, group, andList(others), strings.Join(ev.types, ", "))
		}
	}
}
