package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
)

// watermillSystem is ThreeDotsLabs/watermill-sql v4 set up as its documentation does: a SQL
// publisher built on the business transaction, a SQL subscriber with DefaultMySQLSchema and
// DefaultMySQLOffsetsAdapter, all defaults (batch 100, poll 1s, ack deadline 30s).
type watermillSystem struct{}

const wmTopic = "bench_events"

// The consumer group is what several subscribers share to split one topic.
const wmGroup = "bench"

func (watermillSystem) name() string { return "watermill" }

func (watermillSystem) schema() wsql.DefaultMySQLSchema { return wsql.DefaultMySQLSchema{} }

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

func (watermillSystem) inTx(ctx context.Context, db *sql.DB, fn func(tx *sql.Tx) error) error {
	return plainTx(ctx, db, fn)
}

func (w watermillSystem) consume(ctx context.Context, db *sql.DB, c consumerConfig, onMsg func([]byte)) (func() error, error) {
	sub, err := wsql.NewSubscriber(wsql.BeginnerFromStdSQL(db), wsql.SubscriberConfig{
		ConsumerGroup:  wmGroup,
		SchemaAdapter:  w.schema(),
		OffsetsAdapter: wsql.DefaultMySQLOffsetsAdapter{},
		PollInterval:   c.PollInterval,
	}, nil)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	ch, err := sub.Subscribe(ctx, wmTopic)
	if err != nil {
		cancel()
		return nil, errors.Join(err, sub.Close())
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
	return func() error {
		cancel()
		err := sub.Close()
		wg.Wait()
		return err
	}, nil
}

// verifyDrained checks that the consumer group's acked offset reached the last message.
func (w watermillSystem) verifyDrained(ctx context.Context, db *sql.DB, n int) error {
	var maxOffset, acked sql.NullInt64
	if err := db.QueryRowContext(ctx, "SELECT MAX(`offset`) FROM "+w.schema().MessagesTable(wmTopic)).Scan(&maxOffset); err != nil {
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
	return countRows(ctx, db, w.schema().MessagesTable(wmTopic))
}
