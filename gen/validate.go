package gen

import (
	"errors"
	"fmt"
	"go/token"
	"math"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// The second stage makes every semantic check of a loaded catalog and collects all problems.
// The model stage runs only when validate found nothing, so it can trust its input.
// This file holds the entry point, the header and the policies. Types and fields are checked in
// validate_types.go, events and their keys in validate_event.go, ordering groups in
// validate_ordering.go, and type cycles in validate_cycles.go.

var (
	wireNameRe  = regexp.MustCompile(`^[a-z][a-z0-9_.]*$`)
	typeNameRe  = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	fieldNameRe = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]*$`)
	packageRe   = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	goIdentRe   = regexp.MustCompile(`^[A-Z][A-Za-z0-9_]*$`)
	goPathRe    = regexp.MustCompile(`^[A-Za-z0-9_.~+-]+(/[A-Za-z0-9_.~+-]+)*$`)
)

// builtinTypes are the catalog's scalar and special types, in the order docs/events-yaml.md lists
// them.
var builtinTypes = []string{"string", "bool", "int", "int32", "int64", "uint32", "uint64", "float64", "time", "duration", "bytes", "json"}

func isBuiltin(s string) bool {
	for _, b := range builtinTypes {
		if b == s {
			return true
		}
	}
	return false
}

// maxBackoff is the longest backoff.max the runtime accepts (runtime/outbox's maxDelay, which
// keeps a delay inside the DATETIME arithmetic of every server); a longer one would pass here
// and make outbox.NewWorker refuse the router.
const maxBackoff = 100 * 365 * 24 * time.Hour

// reservedMethods are the methods of generated structs, which a field's Go name must not take.
var (
	payloadMethods = []string{"EventType", "IdempotencyKey", "Validate", "MarshalJSON"}
	structMethods  = []string{"Validate", "MarshalJSON"}
)

type validator struct {
	ps       *problems
	c        *catalog
	types    map[string]*typeDecl
	renamed  map[string]bool      // the suggested names of invalidly named types
	typeHint []string             // names a field's type may be, for did-you-mean
	names    map[string]nameOwner // every generated top-level Go name
	modules  *[]string            // the modules the catalog's go.mod and go.work name, once looked up
	goTypes  *goTypeChecker       // reads {go:} key types' declarations, once needed
	badGo    map[*fieldDecl]bool  // fields whose go: was reported already
	// groups holds the events of each ordering group with a valid key, in file order;
	// groupOrder the groups as they first appear.
	groups     map[string][]orderedEvent
	groupOrder []string
}

type nameOwner struct {
	what string
	p    pos
}

func validate(c *catalog, ps *problems) {
	v := &validator{ps: ps, c: c, types: map[string]*typeDecl{}, renamed: map[string]bool{}, names: map[string]nameOwner{}, badGo: map[*fieldDecl]bool{}, groups: map[string][]orderedEvent{}}
	v.header()
	v.policy(c.defaults, "defaults", false)
	v.claim("Handlers", "the generated Handlers interface", pos{})
	v.claim("NewRouter", "the generated NewRouter function", pos{})
	declared := map[string]bool{}
	for _, t := range c.types {
		declared[t.name.v] = true
	}
	v.typeHint = append([]string{"enum"}, builtinTypes...)
	for _, t := range c.types {
		if !typeNameRe.MatchString(t.name.v) {
			// Suggest a name only when it would be accepted. Fields that already use it are
			// not reported again: this error covers them.
			suggest := ""
			if s := snakeName(t.name.v); typeNameRe.MatchString(s) && !isBuiltin(s) && s != "enum" && !declared[s] && !v.renamed[s] {
				suggest = fmt.Sprintf(" (did you mean %q?)", s)
				v.renamed[s] = true
				v.typeHint = append(v.typeHint, s)
			}
			ps.add(t.name.p, "type %q: invalid name: use lower_snake_case, [a-z][a-z0-9_]*%s", t.name.v, suggest)
			continue
		}
		if isBuiltin(t.name.v) || t.name.v == "enum" {
			ps.add(t.name.p, "type %q: the name of a built-in type; choose another", t.name.v)
			continue
		}
		v.types[t.name.v] = t
		v.typeHint = append(v.typeHint, t.name.v)
	}
	for _, t := range c.types {
		v.typeDecl(t)
	}
	if len(c.events) == 0 && !c.present["events:entries"] {
		ps.add(c.root, "no events: add an events: mapping with at least one event")
	}
	for _, e := range c.events {
		v.event(e)
	}
	v.orderingGroups()
	v.cycles()
}

func (v *validator) header() {
	c, ps := v.c, v.ps
	switch {
	case c.version == nil:
		if !c.present["version"] {
			ps.add(c.root, "missing version: add `version: 1`")
		}
	case c.version.v != "1":
		ps.add(c.version.p, "unsupported version %q: this outboxgen reads version 1", c.version.v)
	}
	switch {
	case c.pkg == nil:
		if !c.present["package"] {
			ps.add(c.root, "missing package: add `package: NAME`, the Go package of the generated file")
		}
	case !packageRe.MatchString(c.pkg.v):
		ps.add(c.pkg.p, "package %q: not a valid Go package name (use lowercase letters, digits and _)", c.pkg.v)
	case token.IsKeyword(c.pkg.v):
		ps.add(c.pkg.p, "package %q: a Go keyword cannot be a package name", c.pkg.v)
	}
	if c.output != nil {
		out := c.output.v
		clean := path.Clean(strings.ReplaceAll(out, `\`, "/"))
		switch {
		case path.IsAbs(clean) || strings.HasPrefix(out, `\`) || (len(out) > 1 && out[1] == ':'):
			ps.add(c.output.p, "output %q: must be a path relative to the catalog's directory", out)
		case clean == ".." || strings.HasPrefix(clean, "../"):
			ps.add(c.output.p, "output %q: outside the catalog's directory; generate next to the catalog or below it", out)
		case !strings.HasSuffix(clean, ".go"):
			ps.add(c.output.p, "output %q: must name a .go file", out)
		case strings.HasSuffix(clean, "_test.go"):
			ps.add(c.output.p, "output %q: a _test.go file is only compiled in tests; choose another name", out)
		}
	}
}

// claim records a generated top-level Go name and reports a collision with an earlier one.
func (v *validator) claim(name, what string, p pos) bool {
	if prev, taken := v.names[name]; taken {
		at := ""
		if prev.p.line > 0 {
			at = fmt.Sprintf(" (line %d)", prev.p.line)
		}
		v.ps.add(p, "%s: Go name %s collides with %s%s; rename one of them", what, name, prev.what, at)
		return false
	}
	v.names[name] = nameOwner{what, p}
	return true
}

func (v *validator) policy(d *policyDecl, what string, direct bool) {
	if d == nil {
		return
	}
	if d.maxAttempts != nil {
		// The value goes to outbox_messages.max_attempts, an INT: a larger one passes here and
		// then fails every Enqueue.
		n, err := strconv.ParseInt(d.maxAttempts.v, 10, 64)
		switch {
		case errors.Is(err, strconv.ErrRange) && !strings.HasPrefix(d.maxAttempts.v, "-"), err == nil && n > math.MaxInt32:
			v.ps.add(d.maxAttempts.p, "%s: max_attempts %s is over %d, the most the max_attempts column (INT) holds", what, d.maxAttempts.v, math.MaxInt32)
		case err != nil || n < 1:
			v.ps.add(d.maxAttempts.p, "%s: max_attempts must be a whole number from 1 to %d, found %q", what, math.MaxInt32, d.maxAttempts.v)
		}
	}
	if d.timeout != nil {
		if _, err := parseDuration(d.timeout.v); err != nil {
			v.ps.add(d.timeout.p, "%s: timeout: %v", what, err)
		}
	}
	if direct && d.backoff != nil {
		v.ps.add(d.backoff.p, "%s: backoff applies to outbox delivery; a direct event retries a few times within its timeout", what)
		return
	}
	if d.backoff != nil && d.backoffInitial == nil && d.backoffMax == nil {
		v.ps.add(d.backoff.p, "%s: backoff: set initial, max or both", what)
	}
	var initial, max time.Duration
	if d.backoffInitial != nil {
		var err error
		if initial, err = parseDuration(d.backoffInitial.v); err != nil {
			v.ps.add(d.backoffInitial.p, "%s: backoff: initial: %v", what, err)
		}
	}
	if d.backoffMax != nil {
		var err error
		if max, err = parseDuration(d.backoffMax.v); err != nil {
			v.ps.add(d.backoffMax.p, "%s: backoff: max: %v", what, err)
		} else if max > maxBackoff {
			v.ps.add(d.backoffMax.p, "%s: backoff: max %s is over %s (100 years), the longest delay outbox.NewWorker accepts", what, d.backoffMax.v, shortDuration(maxBackoff))
		}
	}
	if initial > 0 || max > 0 {
		// Compare what the worker will use: unset bounds come from defaults:, then the runtime.
		ri, rm := initial, max
		if dd := v.c.defaults; dd != nil && d != dd {
			if ri == 0 && dd.backoffInitial != nil {
				ri, _ = parseDuration(dd.backoffInitial.v)
			}
			if rm == 0 && dd.backoffMax != nil {
				rm, _ = parseDuration(dd.backoffMax.v)
			}
		}
		if ri == 0 {
			ri = outbox.DefaultBackoffInitial
		}
		if rm == 0 {
			rm = outbox.DefaultBackoffMax
		}
		if ri > rm {
			v.ps.add(d.backoff.p, "%s: backoff: initial %s is longer than max %s", what, shortDuration(ri), shortDuration(rm))
		}
	}
}
