package outboxnats_test

import (
	"context"
	"database/sql"
	"log"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxgen/outboxgen/examples/events"
	"github.com/outboxgen/outboxgen/runtime/outbox"
	"github.com/outboxgen/outboxgen/runtime/outboxnats"
)

// A relay process: every outbox event of the catalog goes to the OUTBOX stream, on
// "outbox.<event type>". (Compiled, not run: it needs a database and a NATS server.)
func Example() {
	ctx := context.Background()
	db, err := sql.Open("mysql", "app:secret@tcp(127.0.0.1:3306)/shop?parseTime=true")
	if err != nil {
		log.Fatal(err)
	}
	nc, err := nats.Connect(nats.DefaultURL, nats.MaxReconnects(-1))
	if err != nil {
		log.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		log.Fatal(err)
	}
	// The duplicate window should outlast a retry after a lost ack and a dead worker's lease.
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: "OUTBOX", Subjects: []string{"outbox.>"}, Storage: jetstream.FileStorage, Duplicates: time.Hour,
	}); err != nil {
		log.Fatal(err)
	}

	// Every outbox event of the catalog, with the catalog's policies. Register reads the
	// generated router's event types and policies and never calls its handlers: nil will do.
	relay := outbox.NewRouter()
	if err := outboxnats.Register(relay, js, events.NewRouter(nil)); err != nil {
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
