package outboxkafka

import (
	"encoding/json"

	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// Defaults of the options.
const (
	// DefaultTopicPrefix is put before the event type to make the topic.
	DefaultTopicPrefix = "outbox."
	// DefaultMetadataPrefix starts the names of the outbox's metadata headers.
	DefaultMetadataPrefix = "outbox-"
)

// Option configures a Publisher.
type Option func(*config)

// KeyFunc returns the record key of a delivery; "" means the default (the ordering key, else
// the idempotency key).
type KeyFunc func(payload json.RawMessage, d outbox.Delivery) string

type config struct {
	topic      func(eventType string) string
	key        KeyFunc
	metaPrefix string
	source     string
}

func newConfig(opts []Option) config {
	c := config{metaPrefix: DefaultMetadataPrefix}
	WithTopicPrefix(DefaultTopicPrefix)(&c)
	for _, o := range opts {
		o(&c)
	}
	return c
}

// WithTopicPrefix produces an event type to prefix + the event type. The default is
// DefaultTopicPrefix, "outbox.". An empty prefix produces to the event type itself.
func WithTopicPrefix(prefix string) Option {
	return func(c *config) {
		c.topic = func(eventType string) string { return prefix + eventType }
	}
}

// WithTopic replaces the mapping from event type to topic. It is called once per event type,
// at Register (or on the first delivery of a type, for a Publisher used by hand), and must
// return a valid topic name.
func WithTopic(topic func(eventType string) string) Option {
	return func(c *config) { c.topic = topic }
}

// WithKey chooses the record key of each delivery; where key returns "", the default applies.
func WithKey(key KeyFunc) Option {
	return func(c *config) { c.key = key }
}

// KeyFromHeader is a KeyFunc that takes the record key from the message header name (set
// with outbox.Header at enqueue); messages without it get the default key.
func KeyFromHeader(name string) KeyFunc {
	return func(_ json.RawMessage, d outbox.Delivery) string { return d.Headers[name] }
}

// WithMetadataPrefix names the metadata headers prefix + "message-id", "event-type",
// "idempotency-key", "attempt", "enqueued-at" and "ordering-key" (when the message has one). The default is DefaultMetadataPrefix,
// "outbox-", which the core reserves: no message header can start with it. An empty prefix
// leaves the metadata headers out; any other prefix may collide with a message's own header,
// and then the record carries both.
func WithMetadataPrefix(prefix string) Option {
	return func(c *config) { c.metaPrefix = prefix }
}

// WithSource names the database this relay reads (a shard, a region), for relays of several
// databases into one topic: the metadata gets prefix + "source", so consumers can tell the
// "msg:<id>" keys of two databases apart (ids are per database) and deduplicate on the pair.
// The name is 1 to 64 ASCII letters, digits and the characters -_.: (Register refuses another).
func WithSource(name string) Option {
	return func(c *config) { c.source = name }
}
