// Package outboxnats relays outbox messages to NATS JetStream: a Publisher is an ordinary
// outbox handler that publishes each delivery to a stream and returns only once the stream has
// acknowledged it (the PubAck). The worker then marks the row SENT; a failed publish or a
// missing ack is an error, so the row goes back to PENDING with its backoff and is published
// again later. Delivery into the stream is therefore at least once, and JetStream's duplicate
// window turns the repeats into one stored message: every publish carries a Nats-Msg-Id made
// from Delivery.IdempotencyKey (MsgID).
//
// It lives in a module of its own so the core's dependencies do not grow.
//
// # Wiring
//
//	relay := outbox.NewRouter()
//	err := outboxnats.Register(relay, js, events.NewRouter(nil)) // every event of the catalog
//	w, err := outbox.NewWorker(db, relay, outbox.Config{})
//
// Register reads only the event types and policies of the catalog's router (its handlers are
// never called, so nil Handlers will do) and registers a publishing handler for each on relay.
// Types lists event types by hand. New gives the Publisher itself, whose Handle method is an
// outbox.HandlerFunc, for a router put together by hand.
//
// # The mapping
//
//   - Subject: SubjectPrefix + the event type, "outbox." by default: welcome_email is published
//     on outbox.welcome_email. WithSubjectPrefix changes the prefix, WithSubject replaces the
//     mapping. Dots in an event type are legal and make more tokens (billing.invoice_paid is
//     outbox.billing.invoice_paid). Register checks every subject up front and refuses one that
//     is not a valid literal NATS subject (empty token, whitespace, a * or > token), so the
//     stream's subjects, "outbox.>" say, can be written knowing what will arrive.
//   - Data: the payload, byte for byte as enqueued (JSON).
//   - Nats-Msg-Id: MsgID(Delivery.IdempotencyKey), the key of the message, or "msg:<id>" when
//     it was enqueued without one, encoded as "Encoding" below says (a key of printable ASCII
//     with no space at either end and no leading '~' is its own id); with WithSource(name),
//     name + "/" + that id.
//   - Headers: every header of the message (outbox.Header, the trace context that
//     runtime/outboxotel writes: traceparent, tracestate, baggage) under its own name, then
//     the outbox's metadata under MetadataPrefix ("outbox-" by default, the prefix the core
//     reserves, so no header of the message can collide with them):
//     outbox-message-id (the row id), outbox-event-type, outbox-idempotency-key, outbox-attempt
//     (1 on the first delivery), outbox-enqueued-at (RFC 3339 with nanoseconds, UTC),
//     outbox-ordering-key (only when the message has one) and outbox-source (only with
//     WithSource). WithMetadataPrefix("") leaves the metadata out. Names and values are
//     encoded as "Encoding" says.
//
// # Encoding
//
// nats.go writes headers with net/http's rules: a CR or LF in a value becomes a space, spaces
// and tabs at either end of a value are trimmed, and a header whose name is not an HTTP token
// is left out. Written as they are, the keys "inv 7", "inv\n7" and "inv\r7" would be one
// Nats-Msg-Id, and JetStream would drop the second and third messages as duplicates of the
// first. So the Publisher writes each Nats-Msg-Id, header name and header value either as it is
// or as "~" + its base64url (RFC 4648 section 5, without padding):
//
//   - Nats-Msg-Id: as it is when the key is printable ASCII (0x20 to 0x7e) and neither starts
//     nor ends with a space nor starts with '~'. Such a key is its own id in every version of
//     the relay, so the duplicate window holds across a rolling deploy. With WithSource, the
//     source + "/" comes before the encoded id.
//   - A header name: as it is when it is an HTTP token (letters, digits and !#$%&'*+-.^_`|~)
//     not starting with '~': tenant:id arrives as ~dGVuYW50Omlk.
//   - A header value: as it is when it is valid UTF-8 without control characters (tab
//     included) and neither starts nor ends with a space nor starts with '~': a traceparent,
//     "inv 7" and "Zürich" arrive as they are, " acme" as ~IGFjbWU.
//
// No string written as it is starts with '~', so distinct strings stay distinct. A consumer
// decodes every name and value the same way (Decode, in Go): a string starting with '~' is the
// unpadded base64url of the original, any other is the original. The metadata headers are
// encoded too: outbox-idempotency-key decodes to the key, outbox-ordering-key to the ordering key.
//
// # What the duplicate window covers
//
// JetStream drops a message whose Nats-Msg-Id it has stored within the stream's Duplicates
// window (2 minutes by default), answering with a PubAck whose Duplicate is true; the
// Publisher counts that as success. So a publish that reached the stream but whose ack was lost
// (a timeout, a broken connection, a worker killed before it recorded SENT) is not stored twice
// when it is retried within the window. The retry comes after the event's backoff, or, for a
// worker that died, after the lease (Config.StaleAfter, 5 minutes by default) and the reclaim,
// and later still when the server or the relay is down in between: set the stream's Duplicates
// above the longest gap you expect (an hour, say, with the default lease and a relay backoff
// capped at minutes), or a late retry is stored again. Consumers that must not repeat an effect still deduplicate on Nats-Msg-Id.
//
// The window is per stream, not per subject: two messages with one idempotency key are one
// message to JetStream, whatever their event types. Keys that generated code writes begin with
// the event type and "msg:<id>" is unique, so only hand-written keys shared across types can
// collide; the same key enqueued twice for one event is the same logical event, and JetStream
// keeps the first (within the window). Message ids, and so "msg:<id>", are unique per database
// only: when relays of several databases (shards) publish into one stream, give each its
// WithSource name, or the second database's msg:17 is dropped as a duplicate of the first's.
//
// # Errors
//
// Every publish error is returned for a retry (the worker's backoff, up to the message's
// attempts): no connection, no ack within AckTimeout, no stream bound to the subject ("no
// response from stream", which is also what a stream being created or moved looks like, and an
// operator fixes by adding the stream), a stream that is full. Permanent (outbox.Permanent, the
// message goes FAILED at once with the reason as its last_error) are only the refusals that no
// retry can change: a message larger than the server's max_payload or the stream's
// MaxMsgSize, headers beyond the stream's header limit, and a message header whose name starts
// with "Nats-" in any case (JetStream would obey it as a control header: a rollup, a TTL, an
// expected sequence).
//
// # Order
//
// Messages with one ordering key (Message.OrderingKey; generated code sets it from the
// catalog's ordering_key) are handed to the relay one at a time, in the order their enqueuing
// transactions committed, and the next only once the previous is SENT; the Publisher returns
// only after the stream's ack, so a key's messages are stored in commit order. A redelivery is
// published before the key's next message, never after it, and the duplicate window drops it.
// A consumer of the stream, or of any of its subjects, sees that order; the key is in
// outbox-ordering-key. Messages without an ordering key have no order, in the outbox or in the
// stream.
package outboxnats
