package outboxnats

import "time"

// Defaults of the options.
const (
	// DefaultSubjectPrefix is put before the event type to make the subject.
	DefaultSubjectPrefix = "outbox."
	// DefaultMetadataPrefix starts the names of the outbox's metadata headers.
	DefaultMetadataPrefix = "outbox-"
	// DefaultAckTimeout bounds one publish and its ack (the event's policy timeout bounds it
	// too, when shorter).
	DefaultAckTimeout = 5 * time.Second
)

// Option configures a Publisher.
type Option func(*config)

type config struct {
	subject    func(eventType string) string
	metaPrefix string
	ackTimeout time.Duration
	source     string
}

func newConfig(opts []Option) config {
	c := config{metaPrefix: DefaultMetadataPrefix, ackTimeout: DefaultAckTimeout}
	WithSubjectPrefix(DefaultSubjectPrefix)(&c)
	for _, o := range opts {
		o(&c)
	}
	return c
}

// WithSubjectPrefix publishes an event type on prefix + the event type. The default is
// DefaultSubjectPrefix, "outbox.". An empty prefix publishes on the event type itself.
func WithSubjectPrefix(prefix string) Option {
	return func(c *config) {
		c.subject = func(eventType string) string { return prefix + eventType }
	}
}

// WithSubject replaces the mapping from event type to subject. It is called once per event
// type, at Register (or on the first delivery of a type, for a Publisher used by hand), and
// must return a valid literal NATS subject.
func WithSubject(subject func(eventType string) string) Option {
	return func(c *config) { c.subject = subject }
}

// WithMetadataPrefix names the metadata headers prefix + "message-id", "event-type",
// "idempotency-key", "attempt", "enqueued-at" and "ordering-key" (when the message has one). The default is DefaultMetadataPrefix,
// "outbox-", which the core reserves: no message header can start with it. An empty prefix
// leaves the metadata headers out; any other prefix may collide with a message's own header,
// and the metadata wins.
func WithMetadataPrefix(prefix string) Option {
	return func(c *config) { c.metaPrefix = prefix }
}

// WithAckTimeout bounds how long one publish waits for the stream's ack before it counts as a
// failure (and the message is retried). The event's policy timeout still applies when it is
// shorter. The default is DefaultAckTimeout, 5s.
func WithAckTimeout(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.ackTimeout = d
		}
	}
}

// WithSource names the database this relay reads (a shard, a region), for relays of several
// databases into one stream: the Nats-Msg-Id becomes source + "/" + the idempotency key, so the
// "msg:<id>" keys of two databases (ids are per database) are not taken for duplicates of each
// other, and the metadata gets prefix + "source". The name is 1 to 64 ASCII letters, digits
// and the characters -_.: (Register refuses another).
func WithSource(name string) Option {
	return func(c *config) { c.source = name }
}
