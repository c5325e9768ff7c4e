package gen

import (
	"sort"
	"strings"
)

// cycles reports struct types that contain themselves by value: such a struct has infinite
// size. A reference through []T, map[string]T or optional: true is fine.
func (v *validator) cycles() {
	const (
		white = iota
		grey
		black
	)
	color := map[string]int{}
	var names []string
	for n := range v.types {
		names = append(names, n)
	}
	sort.Strings(names)
	reported := map[string]bool{}
	var visit func(name string, path []string)
	visit = func(name string, path []string) {
		t := v.types[name]
		if t == nil || t.isEnum {
			return
		}
		color[name] = grey
		for _, f := range t.fields {
			if f.typ == nil || f.optional {
				continue
			}
			te := parseTypeExpr(f.typ.v)
			if len(te.wrappers) > 0 {
				continue
			}
			next := te.base
			switch color[next] {
			case grey:
				start := v.types[next]
				if !reported[next] && start != nil {
					reported[next] = true
					chain := append(append([]string(nil), path...), name+"."+f.name.v, next)
					v.ps.add(f.name.p, "type %q: contains itself by value (%s); make the field optional: true, or a list", next, strings.Join(cycleChain(chain, next), " -> "))
				}
			case white:
				visit(next, append(path, name+"."+f.name.v))
			}
		}
		color[name] = black
	}
	for _, n := range names {
		if color[n] == white {
			visit(n, nil)
		}
	}
}

// cycleChain trims a DFS path to the cycle that starts and ends at name.
func cycleChain(chain []string, name string) []string {
	for i, step := range chain {
		if step == name || strings.HasPrefix(step, name+".") {
			return chain[i:]
		}
	}
	return chain
}
