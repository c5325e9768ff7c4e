package gen

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

// This file is accept_breaking:, the catalog's list of breaking changes a team reviewed and
// means to make. outboxgen breaking reports each change with an id; an entry names one id and
// says why, and that change no longer fails the comparison:
//
//	accept_breaking:
//	  - change: event order_placed field note removed
//	    reason: nothing reads note since March; no row pending (outboxgen status)
//
// An entry applies to the comparison in which it is added. One that the version compared
// against already holds (the same change and reason) was for an earlier comparison, a change
// that version has made already: it is ignored, so merging it leaves the next comparison
// green, and it can be deleted at any time. An added entry that matches no change is stale
// and fails, as a typo in an id would otherwise pass unnoticed.

// acceptDecl is one entry of accept_breaking:.
type acceptDecl struct {
	change, reason str
}

// acceptBreaking reads accept_breaking: a list of {change, reason}, each change named once.
func (l *loader) acceptBreaking(n *yaml.Node) []acceptDecl {
	const what = "accept_breaking"
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil
	}
	if l.alias(n, what) {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		l.ps.add(nodePos(n), "%s: expected a list of {change: ID, reason: TEXT}, found %s", what, kindName(n))
		return nil
	}
	var out []acceptDecl
	seen := map[string]pos{}
	for _, item := range n.Content {
		if !l.mapping(item, what+": entry") {
			continue
		}
		var d acceptDecl
		var change, reason *str
		written := map[string]bool{} // keys written, even with a value that was rejected
		l.keys(item, []string{"change", "reason"}, func(key string, k, v *yaml.Node) {
			written[key] = true
			switch key {
			case "change":
				change = l.scalar(v, what+": change")
			case "reason":
				reason = l.scalar(v, what+": reason")
			}
		})
		switch {
		case change == nil && written["change"]:
			continue
		case change == nil:
			l.ps.add(nodePos(item), "%s: entry without change: name the change id outboxgen breaking printed", what)
			continue
		case strings.TrimSpace(change.v) == "":
			l.ps.add(change.p, "%s: empty change: name the change id outboxgen breaking printed", what)
			continue
		case reason == nil && written["reason"]:
		case reason == nil || strings.TrimSpace(reason.v) == "":
			at := nodePos(item)
			if reason != nil {
				at = reason.p
			}
			l.ps.add(at, "%s: change %q: reason is required: say why the break is intended and what was done about the rows it affects", what, change.v)
		}
		if first, dup := seen[change.v]; dup {
			l.ps.add(change.p, "%s: change %q is accepted twice (first at line %d)", what, change.v, first.line)
			continue
		}
		seen[change.v] = change.p
		d.change = *change
		if reason != nil {
			d.reason = *reason
		}
		out = append(out, d)
	}
	return out
}

// Acceptance is an accept_breaking: entry, or an --accept id given on the command line (no
// reason, Line 0), that matched a breaking change.
type Acceptance struct {
	ID, Reason string
	Line, Col  int
}

// accept sorts the changes found into the accepted and the failing ones, and reports the
// acceptances added in this version (or given as flags) that matched nothing.
func (b *breaker) accept(rep *BreakingReport, om, nm *file, flags []string) {
	carried := map[acceptDecl]bool{}
	for _, a := range om.accepts {
		carried[acceptDecl{str{v: a.change.v}, str{v: a.reason.v}}] = true
	}
	byID := map[string]*Acceptance{}
	used := map[string]bool{}
	var ids []string
	for _, c := range rep.All {
		ids = append(ids, c.ID)
	}
	for _, a := range nm.accepts {
		if carried[acceptDecl{str{v: a.change.v}, str{v: a.reason.v}}] {
			continue
		}
		byID[a.change.v] = &Acceptance{ID: a.change.v, Reason: a.reason.v, Line: a.change.p.line, Col: a.change.p.col}
	}
	for _, id := range flags {
		if byID[id] == nil {
			byID[id] = &Acceptance{ID: id}
		}
	}
	for i := range rep.All {
		c := &rep.All[i]
		if a := byID[c.ID]; a != nil {
			c.Accepted = a
			used[c.ID] = true
			continue
		}
		rep.Changes = append(rep.Changes, c.Error)
	}
	stale := func(id string) string {
		return fmt.Sprintf("accept_breaking: change %q matches no breaking change against %s%s: remove it, or correct the id", id, b.oldName, closestID(id, ids))
	}
	for _, a := range nm.accepts {
		if a := byID[a.change.v]; a != nil && a.Line > 0 && !used[a.ID] {
			rep.Stale = append(rep.Stale, &Error{Path: b.ps.path, Line: a.Line, Col: a.Col, Msg: stale(a.ID)})
		}
	}
	for _, id := range flags {
		if !used[id] {
			rep.StaleFlags = append(rep.StaleFlags, strings.Replace(stale(id), "accept_breaking: change", "--accept", 1))
		}
	}
}

// closestID returns " (did you mean %q?)" for the change id closest to id, when it is a few
// edits away: Suggest skips strings as long as ids.
func closestID(id string, ids []string) string {
	if len(id) > 512 {
		return "" // no id is that long; skip the quadratic distance on hostile input
	}
	best, bestD := "", -1
	for _, c := range ids {
		if d := editDistance(id, c); bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	if bestD < 0 || bestD > 2 {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}
