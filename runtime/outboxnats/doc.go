// Package outboxnats relays outbox messages to NATS JetStream. A Publisher is an ordinary
// outbox handler. It publishes each delivery to a stream and returns only once the stream has
// acknowledged it with a PubAck. The worker then marks the row SENT. A failed publish or a
// missing ack is an error, so the row goes back to PENDING with its backoff and is published
// again later. Delivery into the stream is therefore at least once. JetStream's duplicate
// window turns the repeats into one stored message, since every publish carries a Nats-Msg-Id
// made from Delivery.IdempotencyKey by MsgID.
//
// It lives in a module of its own so the core's dependencies do not grow.
//
// # Wiring
//
//	relay := outbox.NewRouter()
//	err := outboxnats.Register(relay, js, events.NewRouter(nil)) // every event of the catalog
//	w, err := outbox.NewWorker(db, relay, outbox.Config{})
//
// Register reads only the event types and policies of the catalog's router. Its handlers are
// never called, so nil Handlers will do. Register adds a publishing handler for each type to
// relay. Types lists event types by hand. New gives the Publisher itself, whose Handle method
// is an outbox.HandlerFunc, for a router put together by hand.
//
// # The mapping
//
//   - The subject is SubjectPrefix and the event type. The prefix is "outbox." by default, so
//     welcome_email is published on outbox.welcome_email. WithSubjectPrefix changes the prefix,
//     and WithSubject replaces the mapping. Dots in an event type are legal and make more
//     tokens, so billing.invoice_paid goes to outbox.billing.invoice_paid. Register checks every
//     subject up front. It refuses one that is not a valid literal NATS subject, with an empty
//     token, whitespace, or a * or > token. The stream's subjects, such as "outbox.>", can thus
//     be written knowing what will arrive.
//   - The data is the payload, byte for byte as enqueued.
//   - Nats-Msg-Id is MsgID(Delivery.IdempotencyKey). That is the key of the message, or
//     "msg:<id>" when it was enqueued without one, encoded as "Encoding" below says. A key of
//     printable ASCII with no space at either end and no leading '~' is its own id. With
//     WithSource(name), the id is prefixed by name and a slash.
//   - The headers are every header of the message under its own name, such as the trace
//     context that runtime/outboxotel writes. The outbox's metadata follows under
//     MetadataPrefix, "outbox-" by default. That is the prefix the core reserves, so no header
//     of the message can collide with them. The metadata headers are outbox-message-id,
//     outbox-event-type, outbox-idempotency-key and outbox-attempt, 1 on the first delivery.
//     outbox-enqueued-at is RFC 3339 with nanoseconds, in UTC. outbox-ordering-key comes only
//     when the message has one, and outbox-source only with WithSource.
//     WithMetadataPrefix("") leaves the metadata out. Names and values are encoded as
//     "Encoding" says.
//
// # Encoding
//
// nats.go writes headers with net/http's rules. A CR or LF in a value becomes a space. Spaces
// and tabs at either end of a value are trimmed. A header whose name is not an HTTP token is
// left out. Written as they are, the keys "inv 7", "inv\n7" and "inv\r7" would be one
// Nats-Msg-Id. JetStream would drop the second and third messages as duplicates of the first.
// So the Publisher writes each Nats-Msg-Id, header name and header value either as it is or
// as "~" and its unpadded base64url, from RFC 4648 section 5.
//
//   - A Nats-Msg-Id is written as it is when the key is printable ASCII, 0x20 to 0x7e, and
//     neither starts nor ends with a space nor starts with '~'. Such a key is its own id in
//     every version of the relay, so the duplicate window holds across a rolling deploy. With
//     WithSource, the source and a slash come before the encoded id.
//   - A header name is written as it is when it is an HTTP token not starting with '~'. An
//     HTTP token holds letters, digits and !#$%&'*+-.^_`|~. tenant:id arrives as ~dGVuYW50Omlk.
//   - A header value is written as it is when it is valid UTF-8 without control characters,
//     tab included, and neither starts nor ends with a space nor starts with '~'. A
//     traceparent, "inv 7" and "Zürich" arrive as they are, and " acme" as ~IGFjbWU.
//
// No string written as it is starts with '~', so distinct strings stay distinct. A consumer
// decodes every name and value the same way, with Decode in Go. A string starting with '~' is
// the unpadded base64url of the original, and any other is the original. The metadata headers
// are encoded too. outbox-idempotency-key decodes to the key, and outbox-ordering-key to the
// ordering key.
//
// # What the duplicate window covers
//
// JetStream drops a message whose Nats-Msg-Id it has stored within the stream's Duplicates
// window, 2 minutes by default. It answers with a PubAck whose Duplicate is true, and the
// Publisher counts that as success. A publish may reach the stream and lose its ack, after a
// timeout, a broken connection, or a worker killed before it recorded SENT. Retried within the
// window, it is not stored twice. The retry comes after the event's backoff. For a worker that
// died, it comes after the lease and the reclaim, and Config.StaleAfter is 5 minutes by
// default. It comes later still when the server or the relay is down in between. Set the
// stream's Duplicates above the longest gap you expect, or a late retry is stored again. An
// hour suits the default lease and a relay backoff capped at minutes. Consumers that must not
// repeat an effect still deduplicate on Nats-Msg-Id.
//
// The window is per stream, not per subject. Two messages with one idempotency key are one
// message to JetStream, whatever their event types. Keys that generated code writes begin with
// the event type, and "msg:<id>" is unique. Only hand-written keys shared across types can
// therefore collide. The same key enqueued twice for one event is the same logical event, and
// JetStream keeps the first within the window. Message ids, and so "msg:<id>", are unique per
// database only. Relays of several databases, such as shards, may publish into one stream.
// Give each its WithSource name, or the second database's msg:17 is dropped as a duplicate of
// the first's.
//
// # Errors
//
// Every publish error is returned for a retry, with the worker's backoff, up to the message's
// attempts. Such errors are no connection, no ack within AckTimeout, and a full stream. So is
// no stream bound to the subject, which reads "no response from stream". A stream being
// created or moved looks the same, and an operator fixes it by adding the stream. Only the
// refusals that no retry can change are Permanent. The message then goes FAILED at once with
// the reason as its last_error.
//   - A message larger than the server's max_payload or the stream's MaxMsgSize.
//   - Headers beyond the stream's header limit.
//   - A message header whose name starts with "Nats-" in any case. JetStream would obey it as a
//     control header, such as a rollup, a TTL or an expected sequence.
//
// # Order
//
// Messages with one ordering key are handed to the relay one at a time, in the order their
// enqueuing transactions committed. Generated code sets Message.OrderingKey from the
// catalog's ordering_key. The next message goes only once the previous is SENT. The Publisher
// returns only after the stream's ack, so a key's messages are stored in commit order. A
// redelivery is published before the key's next message, never after it, and the duplicate
// window drops it. A consumer of the stream, or of any of its subjects, sees that order. The
// key is in outbox-ordering-key. Messages without an ordering key have no order, in the outbox
// or in the stream.
package outboxnats
