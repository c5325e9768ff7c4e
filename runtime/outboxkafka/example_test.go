package outboxkafka_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"log"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outboxgen/outboxgen/runtime/outbox"
	"github.com/outboxgen/outboxgen/runtime/outboxkafka"
)

// A relay process: every outbox event of the catalog goes to its topic, "outbox.<event type>",
// keyed by the message header "order-id" where there is one and by the idempotency key
// otherwise. (Compiled, not run: it needs a database and Kafka.)
func Example() {
	ctx := context.Background()
	db, err := sql.Open("mysql", "app:secret@tcp(127.0.0.1:3306)/shop?parseTime=true")
	if err != nil {
		log.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers("kafka-1:9092", "kafka-2:9092")) // idempotent by default
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()

	catalog := outbox.NewRouter() // usually events.NewRouter(nil), generated: only read, never run
	catalog.Handle("order_paid", outbox.Policy{}, func(context.Context, json.RawMessage, outbox.Delivery) error { return nil })

	relay := outbox.NewRouter()
	if err := outboxkafka.Register(relay, cl, catalog, outboxkafka.WithKey(outboxkafka.KeyFromHeader("order-id"))); err != nil {
		log.Fatal(err)
	}
	w, err := outbox.NewWorker(db, relay, outbox.Config{})
	if err != nil {
		log.Fatal(err)
	}
	if err := w.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
