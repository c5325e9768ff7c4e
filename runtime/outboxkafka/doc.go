// Package outboxkafka relays outbox messages to Kafka with franz-go. A Publisher is an ordinary
// outbox handler. It produces each delivery as one record and returns only once the brokers
// have acknowledged it through kgo.Client.ProduceSync. The worker then marks the row SENT. A
// produce error is returned, so the row goes back to PENDING with its backoff and is produced
// again later. Delivery into Kafka is therefore at least once.
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
// Register reads only the event types and policies of the catalog's router. Its handlers are
// never called, so nil Handlers will do. Register adds a producing handler for each type to
// relay. Types lists event types by hand. New gives the Publisher itself, whose Handle method
// is an outbox.HandlerFunc, for a router put together by hand.
//
// # The mapping
//
//   - The topic is TopicPrefix and the event type. The prefix is "outbox." by default, so
//     welcome_email is produced to outbox.welcome_email. WithTopicPrefix changes the prefix,
//     and WithTopic replaces the mapping. Register checks every topic up front and refuses a
//     name Kafka would refuse. Kafka takes 1 to 249 characters of ASCII letters, digits, '.',
//     '_' and '-', other than "." and "..".
//   - The key is Delivery.OrderingKey when the message has one. Generated code sets
//     Message.OrderingKey from the catalog's ordering_key, prefixed by its ordering group.
//     Otherwise the key is Delivery.IdempotencyKey, which is "msg:<id>" for a message enqueued
//     without one. WithKey chooses another. WithKey(KeyFromHeader("order-id")) takes it from a
//     message header set with outbox.Header at enqueue. Any function of the payload and the
//     Delivery will do. Kafka keeps the records of one key in one partition, since the
//     client's partitioner hashes the key. They are thus read in the order they were produced.
//   - The value is the payload, byte for byte as enqueued.
//   - The headers are every header of the message under its own name, sorted, such as the
//     trace context that runtime/outboxotel writes. The outbox's metadata follows under
//     MetadataPrefix, "outbox-" by default. That is the prefix the core reserves, so no header
//     of the message can collide with them. The metadata headers are outbox-message-id,
//     outbox-event-type, outbox-idempotency-key and outbox-attempt, 1 on the first delivery.
//     outbox-enqueued-at is RFC 3339 with nanoseconds, in UTC. outbox-ordering-key comes only
//     when the message has one. outbox-source comes only with WithSource. It names the database
//     a relay of several reads, since message ids and "msg:<id>" are unique per database only.
//     WithMetadataPrefix("") leaves the metadata out.
//   - Keys and headers go byte for byte. Kafka carries record keys and header values as
//     bytes, so they arrive as the message carried them, with no encoding. Keys may differ
//     only in a CR, an LF or an outer space, which NATS headers would merge. Here they are
//     distinct records with distinct keys and outbox-idempotency-key headers.
//   - The timestamp is the client's produce time, not the enqueue time. outbox-enqueued-at
//     holds the enqueue time.
//
// # What the idempotent producer dedupes, and what it does not
//
// kgo enables Kafka's idempotent producer by default. Do not pass kgo.DisableIdempotentWrite.
// The broker drops a batch the client retries after a lost response, within one producer
// session. The client's own retries thus never duplicate or reorder records. It knows nothing
// of the outbox. A worker may die before it recorded SENT. A ProduceSync may return an error
// after the brokers wrote the record, with a timeout while the response was on its way. The
// next attempt then produces the record again as a new record. Kafka has no window that drops
// it by id. Consumers that must not repeat an effect deduplicate on the outbox-idempotency-key
// header, as outbox.Once does in MySQL. The record key does not serve, since the messages of
// an ordering key share it.
//
// # Errors
//
// kgo retries what Kafka calls retriable inside ProduceSync, until the event's policy timeout
// ends it. A leader moving, a broker restarting and a request timing out are retriable. The
// client fails a record whose context is done at its next retry. That retry may wait for fresh
// metadata, for kgo.MetadataMinAge, 5s by default. A record already sent waits for its
// response. Every error that reaches the Publisher is returned for a retry by the worker's
// backoff, up to the message's attempts. Such errors are a broker refusal kgo does not retry,
// an unknown topic and the timeout. An authorization failure and a policy violation are such
// refusals. Only the refusals that no retry can change are Permanent. The message then goes
// FAILED at once with the reason as its last_error.
//   - A record larger than the producer's or the topic's limit, MESSAGE_TOO_LARGE or
//     RECORD_LIST_TOO_LARGE.
//   - A record the broker calls INVALID_RECORD.
//   - An invalid topic name.
//
// # Order
//
// Messages with one ordering key are handed to the relay one at a time, in the order their
// enqueuing transactions committed. The next message goes only once the previous is SENT. The
// Publisher returns only after the brokers acknowledged the record, and the record key is the
// ordering key. A key's records are thus stored in one partition in commit order. A
// redelivery may store a second copy of a record, after a worker died after producing or a
// produce timed out after it was written. The copy comes before the key's next record, never
// after it. Consumers that skip a key's repeats thus see the commit order. Messages without an
// ordering key have no order, in the outbox or in Kafka.
//
// kgo lingers up to 10ms for more records of a partition before it sends a batch. A relay with
// little traffic may prefer kgo.ProducerLinger(0).
package outboxkafka
