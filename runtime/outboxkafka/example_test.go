package outboxkafka_test

import (
	"context"
	"database/sql"
	"log"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outboxgen/outboxgen/examples/events"
	"github.com/outboxgen/outboxgen/runtime/outbox"
	"github.com/outboxgen/outboxgen/runtime/outboxkafka"
)

// A relay process: every outbox event of the catalog goes to its topic, "outbox.<event type>",
// keyed by the ordering key, or the idempotency key for messages without one. (Compiled, not
// run: it needs a database and Kafka.)
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

	// Every outbox event of the catalog, with the catalog's policies. Register reads the
	// generated router's event types and policies and never calls its handlers: nil will do.
	relay := outbox.NewRouter()
	if err := outboxkafka.Register(relay, cl, events.NewRouter(nil)); err != nil {
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
