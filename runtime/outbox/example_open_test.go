package outbox_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"log"
	"time"

	_ "github.com/go-sql-driver/mysql" // registers the "mysql" driver with database/sql

	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// Opening the database: go-sql-driver/mysql with parseTime=true (the runtime reads DATETIME
// columns as time.Time; NewWorker and Migrate say so when it is missing) and the driver's default
// loc=UTC.
func Example_open() {
	db, err := sql.Open("mysql", "app:secret@tcp(127.0.0.1:3306)/shop?parseTime=true")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if err := outbox.Migrate(context.Background(), db); err != nil {
		log.Fatal(err)
	}
}

// Standalone: a message that is the only write it belongs with (here a reminder a cron
// schedules, with no business change beside it) is enqueued on the pool, and says so. Without
// Standalone, Enqueue refuses a *sql.DB: beside a business change, the message must go into that
// change's transaction.
func ExampleStandalone() {
	var db *sql.DB
	ctx := context.Background()
	_, err := outbox.Enqueue(ctx, db, outbox.Message{
		EventType: "trial_ending",
		Payload:   json.RawMessage(`{"company_id":42}`),
	}, outbox.Standalone(), outbox.Delay(24*time.Hour))
	if err != nil {
		log.Fatal(err)
	}
}
