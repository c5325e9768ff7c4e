package outboxkafka

import (
	"errors"

	"github.com/outboxgen/outboxgen/runtime/outbox"
	"github.com/outboxgen/outboxgen/runtime/outboxrelay"
)

// Events is what Register relays: event types and the policy of each, the interface
//
//	EventTypes() []string
//	Policy(eventType string) (outbox.Policy, bool)
//
// An *outbox.Router is one, so a generated catalog's router (events.NewRouter(nil): Register
// reads it and never calls its handlers) gives every outbox event of the catalog with the
// catalog's policies; Types lists event types by hand.
type Events = outboxrelay.Events

// Types returns Events of the given event types, each with policy p. A relay with a policy
// of its own (a shorter backoff than the catalog's handlers need, say) for every event of a
// catalog: Types(p, events.NewRouter(nil).EventTypes()...).
func Types(p outbox.Policy, eventTypes ...string) Events { return outboxrelay.Types(p, eventTypes...) }

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
	p := New(cl, opts...)
	return outboxrelay.Register(pkg, r, events, p.Topic, p.Handle)
}

// pkg starts the errors.
const pkg = "outboxkafka"

// checkSource accepts WithSource's name: "" (no source) or 1 to 64 of [A-Za-z0-9_.:-].
func checkSource(name string) error { return outboxrelay.CheckSource(pkg, name) }
