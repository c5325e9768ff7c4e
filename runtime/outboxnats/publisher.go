package outboxnats

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxgen/outboxgen/runtime/outbox"
	"github.com/outboxgen/outboxgen/runtime/outboxrelay"
)

// Publisher publishes outbox deliveries to JetStream. It is safe for concurrent use; one
// Publisher serves every event type of a router.
type Publisher struct {
	js       jetstream.Publisher
	cfg      config
	subjects *outboxrelay.Destinations
}

// New returns a Publisher on js (a jetstream.JetStream, or anything that publishes like one).
// It panics on a nil js: a startup misconfiguration.
func New(js jetstream.Publisher, opts ...Option) *Publisher {
	if js == nil {
		panic("outboxnats: New: nil JetStream")
	}
	cfg := newConfig(opts)
	return &Publisher{js: js, cfg: cfg, subjects: outboxrelay.NewDestinations(pkg, "subject", cfg.subject, checkSubject)}
}

// Subject returns the subject that eventType is published on, or why the mapping's result is
// not a valid literal NATS subject.
func (p *Publisher) Subject(eventType string) (string, error) { return p.subjects.Get(eventType) }

// Handle publishes the delivery and waits for its ack: an outbox.HandlerFunc. It returns nil
// once the stream holds the message (a duplicate ack included), the publish error for a
// retry otherwise, and outbox.Permanent for what no retry can change (see the package
// documentation, "Errors").
func (p *Publisher) Handle(ctx context.Context, payload json.RawMessage, d outbox.Delivery) error {
	_, err := p.Publish(ctx, payload, d)
	return err
}

// Publish is Handle that also returns the stream's ack: the stream, the sequence, and whether
// JetStream dropped the message as a duplicate of one it already holds.
func (p *Publisher) Publish(ctx context.Context, payload json.RawMessage, d outbox.Delivery) (*jetstream.PubAck, error) {
	subject, err := p.Subject(d.EventType)
	if err != nil {
		return nil, outbox.Permanent(err)
	}
	msg, err := p.message(subject, payload, d)
	if err != nil {
		return nil, outbox.Permanent(fmt.Errorf("outboxnats: message %d (%s): %w", d.MessageID, d.EventType, err))
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.ackTimeout)
	defer cancel()
	// The id goes in as a header set here, not as jetstream.WithMsgID, so no publish option
	// is needed and the default retry on "no responders" (a stream leader moving) still applies.
	ack, err := p.js.PublishMsg(ctx, msg)
	if err != nil {
		err = fmt.Errorf("outboxnats: publish message %d (%s) on %s: %w", d.MessageID, d.EventType, subject, err)
		if permanent(err) {
			return nil, outbox.Permanent(err)
		}
		return nil, err
	}
	return ack, nil
}

// message builds the NATS message of a delivery: the payload as the data, the message's
// headers, the metadata and Nats-Msg-Id. Every header name and value goes through the
// encoding of encoding.go, so nats.go neither merges two of them nor leaves one out.
func (p *Publisher) message(subject string, payload json.RawMessage, d outbox.Delivery) (*nats.Msg, error) {
	h := make(nats.Header, len(d.Headers)+8)
	for k, v := range d.Headers {
		if len(k) >= len(natsPrefix) && strings.EqualFold(k[:len(natsPrefix)], natsPrefix) {
			return nil, fmt.Errorf("header %q: names starting with %q are JetStream's control headers", k, natsPrefix)
		}
		h.Set(headerName(k), headerValue(v))
	}
	if d.IdempotencyKey == "" {
		// The worker always sets it ("msg:<id>" without a key); a hand-made Delivery might not.
		return nil, errors.New("empty IdempotencyKey: Nats-Msg-Id needs one")
	}
	msgID := MsgID(d.IdempotencyKey)
	if src := p.cfg.source; src != "" {
		if err := checkSource(src); err != nil {
			return nil, err
		}
		// A source has no '/', so the id still names one key of one source.
		msgID = src + "/" + msgID
	}
	// The metadata after the message's headers: a collision (only with a prefix other than
	// the reserved "outbox-") goes to the metadata.
	for _, m := range outboxrelay.Metadata(p.cfg.metaPrefix, p.cfg.source, d) {
		h.Set(headerName(m.Key), headerValue(m.Value))
	}
	h.Set(jetstream.MsgIDHeader, msgID)
	return &nats.Msg{Subject: subject, Data: payload, Header: h}, nil
}

// natsPrefix starts the headers that JetStream acts on (Nats-Msg-Id, Nats-Expected-*,
// Nats-Rollup, Nats-TTL, ...).
const natsPrefix = "Nats-"

// JetStream API error codes of refusals that a retry cannot change.
const (
	errCodeMessageTooLarge = 10054 // JSStreamMessageExceedsMaximumErr
	errCodeHeaderTooLarge  = 10097 // JSStreamHeaderExceedsMaximumErr
)

// permanent reports whether a publish error can never succeed for this message.
func permanent(err error) bool {
	if errors.Is(err, nats.ErrMaxPayload) || errors.Is(err, nats.ErrBadSubject) {
		return true
	}
	var api *jetstream.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode {
		case errCodeMessageTooLarge, errCodeHeaderTooLarge:
			return true
		}
	}
	return false
}

// checkSubject accepts a literal subject a client may publish on: tokens separated by single
// dots, none empty, none a wildcard (* or >), no whitespace or control characters.
func checkSubject(s string) error {
	if s == "" {
		return errors.New("empty subject")
	}
	if i := strings.IndexFunc(s, func(r rune) bool { return r <= ' ' || r == 0x7f }); i >= 0 {
		return fmt.Errorf("whitespace or a control character at byte %d", i)
	}
	for i, tok := range strings.Split(s, ".") {
		switch tok {
		case "":
			return fmt.Errorf("token %d is empty", i+1)
		case "*", ">":
			return fmt.Errorf("token %d is the wildcard %q", i+1, tok)
		}
	}
	return nil
}
