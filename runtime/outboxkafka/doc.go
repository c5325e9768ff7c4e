// Package outboxkafka relays outbox messages to Kafka with franz-go: a Publisher is an ordinary
// outbox handler that produces each delivery as one record and returns only once the brokers
// have acknowledged it (kgo.Client.ProduceSync). The worker then marks the row SENT; a produce
// error is returned, so the row goes back to PENDING with its backoff and is produced again
// later. Delivery into Kafka is therefore at least once.
//
// It lives in a module of its own so the core's dependencies do not grow.
//
// # Wiring
//
//	cl, err := kgo.NewClient(kgo.SeedBrokers("kafka:9092")) // idempotent by default
//	relay := outbox.NewRouter()
//	err = outboxkafka.Register(relay, cl, events.NewRouter(nil)) // every event of the catalog
//	w, err := outbox.NewWorker(db, relay, outbox.Config{})
//
// Register reads only the event types and policies of the catalog's router (its handlers are
// never called, so nil Handlers will do) and registers a producing handler for each on relay.
// Types lists event types by hand. New gives the Publisher itself, whose Handle method is an
// outbox.HandlerFunc, for a router put together by hand.
//
// # The mapping
//
//   - Topic: TopicPrefix + the event type, "outbox." by default: welcome_email is produced to
//     outbox.welcome_email. WithTopicPrefix changes the prefix, WithTopic replaces the mapping.
//     Register checks every topic up front and refuses a name Kafka would refuse (1 to 249
//     characters of ASCII letters, digits, '.', '_' and '-', not "." or "..").
//   - Key: Delivery.OrderingKey when the message has one (Message.OrderingKey; generated code
//     sets it from the catalog's ordering_key, prefixed by its ordering group), else
//     Delivery.IdempotencyKey (the key of the message, or "msg:<id>" when it was enqueued
//     without one). WithKey chooses another: WithKey(KeyFromHeader("order-id")) takes it from a
//     message header (set with outbox.Header at enqueue), and any function of the payload and
//     the Delivery will do. Kafka keeps the records of one key in one partition (the client's
//     partitioner hashes the key), so they are read in the order they were produced.
//   - Value: the payload, byte for byte as enqueued (JSON).
//   - Headers: every header of the message (outbox.Header, the trace context that
//     runtime/outboxotel writes: traceparent, tracestate, baggage) under its own name, sorted,
//     then the outbox's metadata under MetadataPrefix ("outbox-" by default, the prefix the core
//     reserves, so no header of the message can collide with them): outbox-message-id (the row
//     id), outbox-event-type, outbox-idempotency-key, outbox-attempt (1 on the first delivery),
//     outbox-enqueued-at (RFC 3339 with nanoseconds, UTC), outbox-ordering-key (only when the
//     message has one) and outbox-source (only with WithSource: the database a relay of several
//     reads, since message ids and "msg:<id>" are unique per database only).
//     WithMetadataPrefix("") leaves the metadata out.
//   - Byte for byte: Kafka carries record keys and header values as bytes, so the key and
//     every header arrive as the message carried them, with no encoding: keys that differ only
//     in a CR, an LF or an outer space (which NATS headers would merge) are distinct records
//     with distinct keys and outbox-idempotency-key headers.
//   - Timestamp: the client's (the produce time), not the enqueue time, which is in
//     outbox-enqueued-at.
//
// # What the idempotent producer dedupes, and what it does not
//
// kgo enables Kafka's idempotent producer by default (do not pass kgo.DisableIdempotentWrite):
// the broker drops a batch the client retries after a lost response, within one producer
// session, so the client's own retries never duplicate or reorder records. It knows nothing of
// the outbox: a record produced by a worker that died before it recorded SENT, or whose
// ProduceSync returned an error after the brokers had written it (a timeout while the
// response was on its way), is produced again by the next attempt as a new record. Kafka has no
// window that drops it by id. Consumers that must not repeat an effect deduplicate on the
// outbox-idempotency-key header (the record key is shared by the messages of an ordering key),
// as outbox.Once does in MySQL.
//
// # Errors
//
// kgo retries what Kafka calls retriable (a leader moving, a broker restarting, a request
// timing out) inside ProduceSync, until the event's policy timeout ends it (the client fails a
// record whose context is done at its next retry, which may wait for fresh metadata:
// kgo.MetadataMinAge, 5s by default; a record already sent waits for its response). Every error that
// reaches the Publisher is returned for a retry by the worker's backoff, up to the message's
// attempts: a broker refusal kgo does not retry (an authorization failure, a policy
// violation), an unknown topic, the timeout. Permanent (outbox.Permanent: the message goes
// FAILED at once with the reason as its last_error) are only the refusals that no retry can
// change: a record larger than the producer's or the topic's limit (MESSAGE_TOO_LARGE,
// RECORD_LIST_TOO_LARGE), a record the broker calls invalid (INVALID_RECORD), an invalid topic
// name.
//
// # Order
//
// Messages with one ordering key are handed to the relay one at a time, in the order their
// enqueuing transactions committed, and the next only once the previous is SENT; the Publisher
// returns only after the brokers acknowledged the record, and the record key is the ordering
// key, so a key's records are stored in one partition in commit order. A redelivery (a worker
// that died after producing, a produce that timed out after it was written) stores a second
// copy of a record before the key's next one, never after it: consumers that skip a key's
// repeats see the commit order. Messages without an ordering key have no order, in the outbox or
// in Kafka.
//
// kgo lingers up to 10ms for more records of a partition before it sends a batch; a relay with
// little traffic may prefer kgo.ProducerLinger(0).
package outboxkafka
