package outboxotel_test

import (
	"context"
	"database/sql"
	"log"
	"os"
	"strings"
	"testing"

	"github.com/outboxgen/outboxgen/runtime/outbox"
	"github.com/outboxgen/outboxgen/runtime/outboxotel"
)

// Wiring, with OpenTelemetry already set up (otel.SetTracerProvider, SetMeterProvider and
// SetTextMapPropagator, as the application does for everything else): one line for the enqueue
// side, one for the worker, one for the table's gauges. The example directory runs a trace end
// to end with the stdout exporter. (Compiled, not run: it needs a database.)
func Example() {
	ctx := context.Background()
	db, err := sql.Open("mysql", "app:secret@tcp(127.0.0.1:3306)/shop?parseTime=true")
	if err != nil {
		log.Fatal(err)
	}

	// Every Enqueue of the process stores the enqueuing span's trace context with the message.
	outboxotel.InstallEnqueue()

	// Every handler call runs in a span linked to it; the worker's events become metrics.
	cfg, err := outboxotel.Instrument(outbox.Config{})
	if err != nil {
		log.Fatal(err)
	}
	// The table's depth, lag and stuck rows, read at each metric collection.
	if _, err := outboxotel.RegisterStats(db); err != nil {
		log.Fatal(err)
	}

	router := outbox.NewRouter() // usually events.NewRouter(handlers), generated
	w, err := outbox.NewWorker(db, router, cfg)
	if err != nil {
		log.Fatal(err)
	}
	if err := w.Run(ctx); err != nil {
		log.Fatal(err)
	}
}

// The core module must not depend on OpenTelemetry: this module exists so that it does not.
func TestCoreModuleHasNoOpenTelemetry(t *testing.T) {
	t.Parallel()
	for _, f := range []string{"../../go.mod", "../../go.sum"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "go.opentelemetry.io") {
			t.Errorf("%s mentions go.opentelemetry.io: the core module gained an OpenTelemetry dependency", f)
		}
	}
}
