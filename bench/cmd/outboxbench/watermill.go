package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
)

// watermillSystem is ThreeDotsLabs/watermill-sql v4 set up as its documentation does: a SQL
// publisher built on the business transaction, a SQL subscriber with DefaultMySQLSchema and
// DefaultMySQLOffsetsAdapter, all defaults (batch 100, poll 1s, ack deadline 30s). On Oracle
// MySQL the schema is mysqlSchema (below), the adaptation a watermill user there needs.
type watermillSystem struct{}

// wmOnMySQL selects mysqlSchema: set from SELECT VERSION() at start (the child process gets it
// as a flag), like the other run-wide settings.
var wmOnMySQL bool

const wmTopic = "bench_events"

// The consumer group is what several subscribers share to split one topic.
const wmGroup = "bench"

func (watermillSystem) name() string { return "watermill" }

func (watermillSystem) schema() wsql.SchemaAdapter {
	if wmOnMySQL {
		return newMySQLSchema()
	}
	return wsql.DefaultMySQLSchema{}
}

// messagesTable is the topic's table name, the same in both schemas.
func (watermillSystem) messagesTable() string {
	return wsql.DefaultMySQLSchema{}.MessagesTable(wmTopic)
}

// mysqlSchema is DefaultMySQLSchema as a watermill user on Oracle MySQL (8.0 and later) has to
// adapt it. DefaultMySQLSchema declares `payload JSON` and binds payload and metadata as []byte;
// the driver sends []byte as a binary string when it interpolates (interpolateParams=true, and the
// bench's preloading), and MySQL refuses a binary string for a JSON column (error 3144, "Cannot
// create a JSON value from a string with CHARACTER SET 'binary'"). MySQL's JSON is also a binary
// document that reorders keys and respaces, so a payload would not come back as it was sent. So:
// the payload column is LONGBLOB (watermill's own GeneratePayloadType knob; its tests use a
// VARBINARY payload on MySQL), and the metadata, still JSON, is bound as a string. MariaDB's JSON
// is LONGTEXT and accepts both, so on MariaDB the bench runs DefaultMySQLSchema unchanged.
type mysqlSchema struct{ wsql.DefaultMySQLSchema }

func newMySQLSchema() mysqlSchema {
	return mysqlSchema{wsql.DefaultMySQLSchema{
		GeneratePayloadType: func(string) string { return "LONGBLOB" },
	}}
}

// InsertQuery is DefaultMySQLSchema's, with the metadata bound as a string instead of []byte.
func (s mysqlSchema) InsertQuery(p wsql.InsertQueryParams) (wsql.Query, error) {
	query := fmt.Sprintf("INSERT INTO %s (uuid, payload, metadata) VALUES %s", s.MessagesTable(p.Topic),
		strings.TrimRight(strings.Repeat("(?,?,?),", len(p.Msgs)), ","))
	args := make([]any, 0, 3*len(p.Msgs))
	for _, msg := range p.Msgs {
		metadata, err := json.Marshal(msg.Metadata)
		if err != nil {
			return wsql.Query{}, fmt.Errorf("could not marshal metadata into JSON for message %s: %w", msg.UUID, err)
		}
		args = append(args, msg.UUID, []byte(msg.Payload), string(metadata))
	}
	return wsql.Query{Query: query, Args: args}, nil
}

func (w watermillSystem) setup(ctx context.Context, db *sql.DB) error {
	if _, err := db.ExecContext(ctx, bizDDL); err != nil {
		return err
	}
	// The subscriber's own initialisation creates the messages and offsets tables; it runs on
	// the pool, never on a business transaction.
	sub, err := wsql.NewSubscriber(wsql.BeginnerFromStdSQL(db), wsql.SubscriberConfig{
		ConsumerGroup:  wmGroup,
		SchemaAdapter:  w.schema(),
		OffsetsAdapter: wsql.DefaultMySQLOffsetsAdapter{},
	}, nil)
	if err != nil {
		return err
	}
	if err := sub.SubscribeInitialize(wmTopic); err != nil {
		return fmt.Errorf("watermill SubscribeInitialize: %w", err)
	}
	return sub.Close()
}

func (w watermillSystem) publisher(tx *sql.Tx) (*wsql.Publisher, error) {
	return wsql.NewPublisher(wsql.TxFromStdSQL(tx), wsql.PublisherConfig{SchemaAdapter: w.schema()}, nil)
}

func (w watermillSystem) enqueue(ctx context.Context, tx *sql.Tx, payload []byte) error {
	return w.enqueueBatch(ctx, tx, [][]byte{payload})
}

func (w watermillSystem) enqueueBatch(ctx context.Context, tx *sql.Tx, payloads [][]byte) error {
	pub, err := w.publisher(tx)
	if err != nil {
		return err
	}
	msgs := make([]*message.Message, len(payloads))
	for i, p := range payloads {
		msgs[i] = message.NewMessageWithContext(ctx, watermill.NewUUID(), p)
	}
	if err := pub.Publish(wmTopic, msgs...); err != nil {
		return fmt.Errorf("watermill publish: %w", err)
	}
	return nil
}

func (watermillSystem) inTx(ctx context.Context, db *sql.DB, fn func(ctx context.Context, tx *sql.Tx) error) error {
	return plainTx(ctx, db, func(tx *sql.Tx) error { return fn(ctx, tx) })
}

func (w watermillSystem) consume(ctx context.Context, db *sql.DB, c consumerConfig, onMsg func([]byte)) (consumer, error) {
	cb := &countingBeginner{Beginner: wsql.BeginnerFromStdSQL(db)}
	sub, err := wsql.NewSubscriber(cb, wsql.SubscriberConfig{
		ConsumerGroup:  wmGroup,
		SchemaAdapter:  w.schema(),
		OffsetsAdapter: wsql.DefaultMySQLOffsetsAdapter{},
		PollInterval:   c.PollInterval,
	}, nil)
	if err != nil {
		return consumer{}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	ch, err := sub.Subscribe(ctx, wmTopic)
	if err != nil {
		cancel()
		return consumer{}, errors.Join(err, sub.Close())
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for msg := range ch {
			if c.HandlerDelay > 0 {
				time.Sleep(c.HandlerDelay)
			}
			onMsg(msg.Payload)
			msg.Ack()
		}
	}()
	counts := func() consumerCounts {
		return consumerCounts{Claims: cb.polls.Load(), Empty: cb.empty.Load(), Stmts: -1}
	}
	return consumer{counts: counts, stop: func() error {
		cancel()
		err := sub.Close()
		wg.Wait()
		return err
	}}, nil
}

// countingBeginner is the Beginner the subscriber gets: it counts watermill's polls. Each poll
// (Subscriber.query in watermill-sql v4.1.2) is one transaction that runs one SELECT of the
// messages table (wmPollPrefix), then, when rows came back, one INSERT per message into the
// offsets table (offset_consumed) and one UPDATE of offset_acked; an empty poll is followed by
// PollInterval of sleep. A poll here is a run of that SELECT; an empty one is a transaction
// that ran it and nothing else.
type countingBeginner struct {
	wsql.Beginner
	polls, empty atomic.Int64
}

// wmPollPrefix starts DefaultMySQLSchema's SelectQuery (and mysqlSchema's, which inherits it).
const wmPollPrefix = "SELECT `offset`, `uuid`, `payload`, `metadata` FROM "

func (b *countingBeginner) BeginTx(ctx context.Context, opts *sql.TxOptions) (wsql.Tx, error) {
	tx, err := b.Beginner.BeginTx(ctx, opts)
	if err != nil {
		return tx, err
	}
	return &countingWmTx{Tx: tx, b: b}, nil
}

type countingWmTx struct {
	wsql.Tx
	b            *countingBeginner
	polled, more bool
}

func (t *countingWmTx) QueryContext(ctx context.Context, query string, args ...any) (wsql.Rows, error) {
	if strings.HasPrefix(query, wmPollPrefix) {
		t.polled = true
		t.b.polls.Add(1)
	} else {
		t.more = true
	}
	return t.Tx.QueryContext(ctx, query, args...)
}

func (t *countingWmTx) ExecContext(ctx context.Context, query string, args ...any) (wsql.Result, error) {
	t.more = true
	return t.Tx.ExecContext(ctx, query, args...)
}

func (t *countingWmTx) Commit() error {
	t.end()
	return t.Tx.Commit()
}

func (t *countingWmTx) Rollback() error {
	t.end()
	return t.Tx.Rollback()
}

func (t *countingWmTx) end() {
	if t.polled && !t.more {
		t.b.empty.Add(1)
	}
	t.polled, t.more = false, false // Commit after a failed Rollback must not count twice
}

// verifyDrained checks that the consumer group's acked offset reached the last message.
func (w watermillSystem) verifyDrained(ctx context.Context, db *sql.DB, n int) error {
	var maxOffset, acked sql.NullInt64
	if err := db.QueryRowContext(ctx, "SELECT MAX(`offset`) FROM "+w.messagesTable()).Scan(&maxOffset); err != nil {
		return err
	}
	err := db.QueryRowContext(ctx, "SELECT offset_acked FROM "+
		wsql.DefaultMySQLOffsetsAdapter{}.MessagesOffsetsTable(wmTopic)+" WHERE consumer_group = ?", wmGroup).Scan(&acked)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	if n > 0 && (!acked.Valid || acked.Int64 != maxOffset.Int64) {
		return fmt.Errorf("watermill: acked offset %v, last offset %v", acked, maxOffset)
	}
	return nil
}

func (w watermillSystem) countMessages(ctx context.Context, db *sql.DB) (int64, error) {
	return countRows(ctx, db, w.messagesTable())
}
