// Package outboxrelay holds what a relay shares with every other relay: a Register that hands
// each event type of a router to a broker (runtime/outboxnats to NATS JetStream,
// runtime/outboxkafka to Kafka, or a relay module of your own). It gives the Events a relay
// relays, Register's checks, the mapping from event type to destination (a subject, a topic)
// checked once per type, the WithSource name check and the outbox's metadata headers, so that
// every relay refuses the same mistakes and writes the same headers.
//
// It uses only the standard library and runtime/outbox: the core module gains no dependency,
// and a relay module depends on the core module's released version, never on its internals.
package outboxrelay

import (
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// Events is what a relay's Register relays: event types and the policy of each. An
// *outbox.Router is one; Types lists event types by hand.
type Events interface {
	EventTypes() []string
	Policy(eventType string) (outbox.Policy, bool)
}

// Types returns Events of the given event types, each with policy p.
func Types(p outbox.Policy, eventTypes ...string) Events {
	return typeList{policy: p, types: eventTypes}
}

type typeList struct {
	policy outbox.Policy
	types  []string
}

func (l typeList) EventTypes() []string { return append([]string(nil), l.types...) }

func (l typeList) Policy(eventType string) (outbox.Policy, bool) {
	for _, t := range l.types {
		if t == eventType {
			return l.policy, true
		}
	}
	return outbox.Policy{}, false
}

// Register adds h to r for every event type of events, with the policy events gives it. It
// checks everything before it registers anything, and refuses: no event types, an empty event
// type, one already on r or listed twice, one without a policy, and one whose destination
// refuses (the error of destination is returned as it is). pkg ("outboxnats") starts the
// other errors. The caller checks its own arguments (nil ones, its options) first.
func Register(pkg string, r *outbox.Router, events Events, destination func(eventType string) (string, error), h outbox.HandlerFunc) error {
	types := events.EventTypes()
	if len(types) == 0 {
		return fmt.Errorf("%s: Register: no event types to relay", pkg)
	}
	policies := make([]outbox.Policy, len(types))
	seen := make(map[string]bool, len(types))
	for i, t := range types {
		if t == "" {
			return fmt.Errorf("%s: Register: empty event type", pkg)
		}
		if _, ok := r.Policy(t); ok || seen[t] {
			return fmt.Errorf("%s: Register: event %q already has a handler", pkg, t)
		}
		seen[t] = true
		pol, ok := events.Policy(t)
		if !ok {
			return fmt.Errorf("%s: Register: event %q has no policy", pkg, t)
		}
		if _, err := destination(t); err != nil {
			return err
		}
		policies[i] = pol
	}
	for i, t := range types {
		r.Handle(t, policies[i], h)
	}
	return nil
}

// Destinations maps event types to destination names (NATS subjects, Kafka topics), each
// mapped and checked once, on its first use. It is safe for concurrent use.
type Destinations struct {
	pkg, kind string
	name      func(eventType string) string
	check     func(name string) error
	cache     sync.Map // event type -> destination
}

type destination struct {
	name string
	err  error
}

// NewDestinations returns Destinations that map an event type with name and check the result
// with check; pkg ("outboxnats") and kind ("subject") go into the errors.
func NewDestinations(pkg, kind string, name func(eventType string) string, check func(name string) error) *Destinations {
	return &Destinations{pkg: pkg, kind: kind, name: name, check: check}
}

// Get returns the destination of eventType, or why check refused it.
func (ds *Destinations) Get(eventType string) (string, error) {
	if v, ok := ds.cache.Load(eventType); ok {
		d := v.(destination)
		return d.name, d.err
	}
	n := ds.name(eventType)
	d := destination{name: n, err: ds.check(n)}
	if d.err != nil {
		d.err = fmt.Errorf("%s: event %q maps to %s %q: %w", ds.pkg, eventType, ds.kind, n, d.err)
	}
	ds.cache.Store(eventType, d)
	return d.name, d.err
}

var sourceName = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,64}$`)

// CheckSource accepts WithSource's name: "" (no source) or 1 to 64 of [A-Za-z0-9_.:-]. pkg
// ("outboxnats") starts the error.
func CheckSource(pkg, name string) error {
	if name != "" && !sourceName.MatchString(name) {
		return fmt.Errorf("%s: WithSource(%.80q): want 1 to 64 characters of [A-Za-z0-9_.:-]", pkg, name)
	}
	return nil
}

// Header is one metadata header.
type Header struct {
	Key, Value string
}

// Metadata returns the outbox's metadata headers of d, in this order: prefix + "message-id"
// (the row id), "event-type", "idempotency-key", "attempt", "enqueued-at" (RFC 3339 with
// nanoseconds, UTC), "ordering-key" (only when d has one) and "source" (only when source is not
// ""). With prefix "" there are none.
func Metadata(prefix, source string, d outbox.Delivery) []Header {
	if prefix == "" {
		return nil
	}
	h := make([]Header, 0, 7)
	h = append(h,
		Header{prefix + "message-id", strconv.FormatInt(int64(d.MessageID), 10)},
		Header{prefix + "event-type", d.EventType},
		Header{prefix + "idempotency-key", d.IdempotencyKey},
		Header{prefix + "attempt", strconv.Itoa(d.Attempt)},
		Header{prefix + "enqueued-at", d.EnqueuedAt.UTC().Format(time.RFC3339Nano)},
	)
	if d.OrderingKey != "" {
		h = append(h, Header{prefix + "ordering-key", d.OrderingKey})
	}
	if source != "" {
		h = append(h, Header{prefix + "source", source})
	}
	return h
}
