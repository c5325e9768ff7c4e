package outbox

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// Router maps event types to handlers and their policies. Generated code builds one with
// NewRouter and RegisterX. The worker claims only the event types its router handles, so an
// old instance in a rolling deploy leaves new types alone.
type Router struct {
	routes map[string]route
}

type route struct {
	policy  Policy // with defaults
	given   Policy // as passed to Handle, for validatePolicy
	handler HandlerFunc
}

// NewRouter returns an empty Router.
func NewRouter() *Router { return &Router{routes: map[string]route{}} }

// Handle registers h for eventType with policy p, whose zero fields take the built-in
// defaults. NewWorker takes a copy of the routes and refuses a negative or out-of-range
// policy. A route added after NewWorker is not served by that worker. Handle panics on an
// empty type, a nil handler or a duplicate type. Those are startup misconfigurations, not
// runtime conditions.
func (r *Router) Handle(eventType string, p Policy, h HandlerFunc) {
	if eventType == "" {
		panic("outbox: Router.Handle: empty event type")
	}
	if h == nil {
		panic(fmt.Sprintf("outbox: Router.Handle(%q): nil handler", eventType))
	}
	if _, dup := r.routes[eventType]; dup {
		panic(fmt.Sprintf("outbox: Router.Handle(%q): event type registered twice", eventType))
	}
	r.routes[eventType] = route{policy: p.WithDefaults(), given: p, handler: h}
}

// EventTypes returns the registered event types, sorted.
func (r *Router) EventTypes() []string {
	out := make([]string, 0, len(r.routes))
	for t := range r.routes {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// Policy returns the resolved policy of eventType and whether it is registered.
func (r *Router) Policy(eventType string) (Policy, bool) {
	rt, ok := r.routes[eventType]
	return rt.policy, ok
}

// snapshot copies the routes. A Worker keeps its own, so a Handle after NewWorker neither races
// with dispatch nor changes what a running worker serves.
func (r *Router) snapshot() *Router {
	c := &Router{routes: make(map[string]route, len(r.routes))}
	for t, rt := range r.routes {
		c.routes[t] = rt
	}
	return c
}

// validatePolicy refuses what would misbehave at run time. That is a negative value, or a Max
// beyond what the backoff arithmetic and the database's DATETIME range handle.
func validatePolicy(eventType string, given, p Policy) error {
	var bad []string
	if given.Backoff.Max < 0 {
		bad = append(bad, fmt.Sprintf("Backoff.Max %s is negative", given.Backoff.Max))
	}
	if p.MaxAttempts < 1 || p.MaxAttempts > math.MaxInt32 {
		bad = append(bad, fmt.Sprintf("MaxAttempts %d is not in 1..%d", p.MaxAttempts, math.MaxInt32))
	}
	if p.Backoff.Initial <= 0 {
		bad = append(bad, fmt.Sprintf("Backoff.Initial %s is not positive", p.Backoff.Initial))
	}
	if p.Backoff.Max > maxDelay {
		bad = append(bad, fmt.Sprintf("Backoff.Max %s is over %s", p.Backoff.Max, maxDelay))
	}
	if p.Timeout <= 0 {
		bad = append(bad, fmt.Sprintf("Timeout %s is not positive", p.Timeout))
	}
	bad = append(bad, limitProblems(p)...)
	if len(bad) > 0 {
		return fmt.Errorf("event %q: policy: %s", eventType, strings.Join(bad, "; "))
	}
	return nil
}

func (r *Router) lookup(eventType string) (route, bool) {
	rt, ok := r.routes[eventType]
	return rt, ok
}
