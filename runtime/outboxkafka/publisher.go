package outboxkafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outboxgen/outboxgen/runtime/outbox"
	"github.com/outboxgen/outboxgen/runtime/outboxrelay"
)

// Producer produces records and waits for their acks: a *kgo.Client.
type Producer interface {
	ProduceSync(ctx context.Context, rs ...*kgo.Record) kgo.ProduceResults
}

// Publisher produces outbox deliveries to Kafka. It is safe for concurrent use; one Publisher
// serves every event type of a router.
type Publisher struct {
	cl     Producer
	cfg    config
	topics *outboxrelay.Destinations
}

// New returns a Publisher on cl (a *kgo.Client). It panics on a nil cl: a startup
// misconfiguration.
func New(cl Producer, opts ...Option) *Publisher {
	if cl == nil {
		panic("outboxkafka: New: nil client")
	}
	cfg := newConfig(opts)
	return &Publisher{cl: cl, cfg: cfg, topics: outboxrelay.NewDestinations(pkg, "topic", cfg.topic, checkTopic)}
}

// Topic returns the topic that eventType is produced to, or why the mapping's result is not a
// valid topic name.
func (p *Publisher) Topic(eventType string) (string, error) { return p.topics.Get(eventType) }

// Handle produces the delivery and waits for its ack: an outbox.HandlerFunc. It returns nil
// once the brokers acknowledged the record, the produce error for a retry otherwise, and
// outbox.Permanent for what no retry can change (see the package documentation, "Errors").
func (p *Publisher) Handle(ctx context.Context, payload json.RawMessage, d outbox.Delivery) error {
	_, err := p.Publish(ctx, payload, d)
	return err
}

// Publish is Handle that also returns the produced record, with its partition and offset.
func (p *Publisher) Publish(ctx context.Context, payload json.RawMessage, d outbox.Delivery) (*kgo.Record, error) {
	rec, err := p.Record(payload, d)
	if err != nil {
		return nil, outbox.Permanent(err)
	}
	if err := p.cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		err = fmt.Errorf("outboxkafka: produce message %d (%s) to %s: %w", d.MessageID, d.EventType, rec.Topic, err)
		if permanent(err) {
			return nil, outbox.Permanent(err)
		}
		return nil, err
	}
	return rec, nil
}

// Record builds the record of a delivery: the topic, the key, the payload as the value, the
// message's headers and the metadata.
func (p *Publisher) Record(payload json.RawMessage, d outbox.Delivery) (*kgo.Record, error) {
	topic, err := p.Topic(d.EventType)
	if err != nil {
		return nil, err
	}
	key := ""
	if p.cfg.key != nil {
		key = p.cfg.key(payload, d)
	}
	if key == "" {
		key = defaultKey(d)
	}
	if key == "" {
		// The worker always sets it ("msg:<id>" without a key); a hand-made Delivery might not.
		return nil, fmt.Errorf("outboxkafka: message %d (%s): empty IdempotencyKey: the record needs a key", d.MessageID, d.EventType)
	}
	names := make([]string, 0, len(d.Headers))
	for k := range d.Headers {
		names = append(names, k)
	}
	slices.Sort(names)
	headers := make([]kgo.RecordHeader, 0, len(names)+7)
	for _, k := range names {
		headers = append(headers, kgo.RecordHeader{Key: k, Value: []byte(d.Headers[k])})
	}
	if p.cfg.metaPrefix != "" {
		// The source goes only into the metadata, so only the metadata needs it checked.
		if err := checkSource(p.cfg.source); err != nil {
			return nil, err
		}
	}
	for _, m := range outboxrelay.Metadata(p.cfg.metaPrefix, p.cfg.source, d) {
		headers = append(headers, kgo.RecordHeader{Key: m.Key, Value: []byte(m.Value)})
	}
	return &kgo.Record{Topic: topic, Key: []byte(key), Value: payload, Headers: headers}, nil
}

// defaultKey is the ordering key when there is one, else the idempotency key.
func defaultKey(d outbox.Delivery) string {
	if d.OrderingKey != "" {
		return d.OrderingKey
	}
	return d.IdempotencyKey
}

// permanent reports whether a produce error can never succeed for this record.
func permanent(err error) bool {
	for _, e := range []error{kerr.MessageTooLarge, kerr.RecordListTooLarge, kerr.InvalidRecord, kerr.InvalidTopicException} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// checkTopic accepts what Kafka accepts as a topic name.
func checkTopic(t string) error {
	switch {
	case t == "":
		return errors.New("empty topic")
	case t == "." || t == "..":
		return errors.New(`"." and ".." are not topic names`)
	case len(t) > 249:
		return fmt.Errorf("%d characters, at most 249", len(t))
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("byte %d (%q) is not an ASCII letter, digit, '.', '_' or '-'", i, c)
		}
	}
	return nil
}
