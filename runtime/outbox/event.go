package outbox

// Event is implemented by every payload type that outboxgen generates: EventType returns the
// wire name stored with the message in event_type, which never changes with Go names. Code
// that works on any event, such as the test kit's Enqueued[T], takes an Event type parameter.
//
// A generated payload type also has an exported DecodeOutboxPayload method on its pointer,
// which decodes a stored payload exactly as its handler's route does before calling the
// handler.
type Event interface {
	EventType() string
}
