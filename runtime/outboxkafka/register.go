package outboxkafka

import (
	"errors"
	"fmt"
	"regexp"

	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// Events is what Register relays: event types and the policy of each. An *outbox.Router is
// one, so a generated catalog's router (events.NewRouter(nil): Register reads it and never
// calls its handlers) gives every outbox event of the catalog with the catalog's policies;
// Types lists event types by hand.
type Events interface {
	EventTypes() []string
	Policy(eventType string) (outbox.Policy, bool)
}

// Types returns Events of the given event types, each with policy p. A relay with a policy
// of its own (a shorter backoff than the catalog's handlers need, say) for every event of a
// catalog: Types(p, events.NewRouter(nil).EventTypes()...).
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

// Register adds to r a handler that produces to cl, for every event type of events, with the
// policy events gives it (the backoff and timeout apply to the relay; the attempts budget is
// the one stored on each row at enqueue). It checks everything before it registers anything,
// and refuses: no event types, an event type already on r, a topic name Kafka would refuse.
func Register(r *outbox.Router, cl Producer, events Events, opts ...Option) error {
	if r == nil || cl == nil || events == nil {
		return errors.New("outboxkafka: Register: nil router, client or events")
	}
	if err := checkSource(newConfig(opts).source); err != nil {
		return err
	}
	types := events.EventTypes()
	if len(types) == 0 {
		return errors.New("outboxkafka: Register: no event types to relay")
	}
	p := New(cl, opts...)
	policies := make([]outbox.Policy, len(types))
	seen := make(map[string]bool, len(types))
	for i, t := range types {
		if t == "" {
			return errors.New("outboxkafka: Register: empty event type")
		}
		if _, ok := r.Policy(t); ok || seen[t] {
			return fmt.Errorf("outboxkafka: Register: event %q already has a handler", t)
		}
		seen[t] = true
		pol, ok := events.Policy(t)
		if !ok {
			return fmt.Errorf("outboxkafka: Register: event %q has no policy", t)
		}
		if _, err := p.Topic(t); err != nil {
			return err
		}
		policies[i] = pol
	}
	for i, t := range types {
		r.Handle(t, policies[i], p.Handle)
	}
	return nil
}

var sourceName = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,64}$`)

// checkSource accepts WithSource's name: "" (no source) or 1 to 64 of [A-Za-z0-9_.:-].
func checkSource(name string) error {
	if name != "" && !sourceName.MatchString(name) {
		return fmt.Errorf("outboxkafka: WithSource(%.80q): want 1 to 64 characters of [A-Za-z0-9_.:-]", name)
	}
	return nil
}
