package outbox

import (
	"fmt"
	"sort"
)

// Router maps event types to handlers and their policies. Generated code builds one with
// NewRouter(Handlers) or RegisterX; the worker claims only the event types its router handles,
// so an old instance in a rolling deploy leaves new types alone.
type Router struct {
	routes map[string]route
}

type route struct {
	policy  Policy
	handler HandlerFunc
}

// NewRouter returns an empty Router.
func NewRouter() *Router { return &Router{routes: map[string]route{}} }

// Handle registers h for eventType with policy p (zero fields take the built-in defaults).
// It panics on an empty type, a nil handler or a duplicate type: those are startup
// misconfigurations, not runtime conditions.
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
	r.routes[eventType] = route{policy: p.WithDefaults(), handler: h}
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

func (r *Router) lookup(eventType string) (route, bool) {
	rt, ok := r.routes[eventType]
	return rt, ok
}
