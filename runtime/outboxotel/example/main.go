// Command example follows one signup from the HTTP request to the welcome mail, with
// OpenTelemetry's stdout exporter: the request's span, then one span per delivery attempt of
// the mail (the first fails and is retried), each linked back to the request's span.
//
//	go run ./example -dsn 'user:pass@tcp(127.0.0.1:3306)/app?parseTime=true'
//
// (from runtime/outboxotel). The DSN defaults to $OUTBOX_DSN. The program creates its table
// (companies) and the outbox's, so point it at a database of its own. Spans are printed as
// JSON as they end; a summary follows.
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.39.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/outboxgen/outboxgen/examples/events"
	"github.com/outboxgen/outboxgen/runtime/outbox"
	"github.com/outboxgen/outboxgen/runtime/outboxotel"
)

func main() {
	dsn := flag.String("dsn", os.Getenv("OUTBOX_DSN"), "database DSN with parseTime=true (default $OUTBOX_DSN)")
	flag.Parse()
	if *dsn == "" {
		fmt.Fprintln(os.Stderr, "example: no database: pass -dsn or set OUTBOX_DSN")
		os.Exit(2)
	}
	db, err := sql.Open("mysql", *dsn)
	if err != nil {
		fmt.Fprintln(os.Stderr, "example:", err)
		os.Exit(1)
	}
	defer db.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, db, os.Stdout, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "example:", err)
		os.Exit(1)
	}
}

// run writes the spans, as the stdout exporter prints them, to spans and the summary to out.
func run(ctx context.Context, db *sql.DB, out, spans io.Writer) error {
	// The application's usual OpenTelemetry setup: a tracer provider and the W3C propagators.
	exporter, err := stdouttrace.New(stdouttrace.WithWriter(spans), stdouttrace.WithPrettyPrint())
	if err != nil {
		return err
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithSyncer(exporter), // a batcher in production
		sdktrace.WithResource(resource.NewSchemaless(semconv.ServiceName("signup"))),
	)
	defer tp.Shutdown(context.Background())
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))

	// outboxgen's side: one line at startup for every Enqueue of the process...
	outboxotel.InstallEnqueue()

	if err := outbox.Migrate(ctx, db); err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS companies (
		id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, name VARCHAR(191) NOT NULL) ENGINE = InnoDB`); err != nil {
		return fmt.Errorf("create table: %w", err)
	}

	request, err := signUp(ctx, db, "Acme", "ops@acme.example")
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "POST /signup: trace %s, span %s; the welcome mail was enqueued in the signup's transaction\n",
		request.TraceID(), request.SpanID())

	mailer := &flakyMailer{out: out}
	router := outbox.NewRouter()
	events.RegisterWelcomeEmail(router, mailer)
	// ...and one for the worker: a span per handler call, and the metrics.
	cfg, err := outboxotel.Instrument(outbox.Config{PollInterval: 50 * time.Millisecond})
	if err != nil {
		return err
	}
	w, err := outbox.NewWorker(db, router, cfg)
	if err != nil {
		return err
	}
	return deliver(ctx, db, w)
}

// signUp is the HTTP handler's work, in the request's span: the company and its welcome mail
// in one transaction. The enqueue hook stores the span's trace context with the message.
func signUp(ctx context.Context, db *sql.DB, company, email string) (trace.SpanContext, error) {
	ctx, span := otel.Tracer("signup").Start(ctx, "POST /signup", trace.WithSpanKind(trace.SpanKindServer))
	defer span.End()
	err := outbox.InTx(ctx, db, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, "INSERT INTO companies (name) VALUES (?)", company)
		if err != nil {
			return err
		}
		id, err := res.LastInsertId()
		if err != nil {
			return err
		}
		_, err = events.EnqueueWelcomeEmail(ctx, tx, events.WelcomeEmail{CompanyID: id, Email: email})
		return err
	})
	return span.SpanContext(), err
}

// flakyMailer fails its first send, as a mail server busy for a moment would.
type flakyMailer struct {
	out   io.Writer
	mu    sync.Mutex
	calls int
}

func (m *flakyMailer) HandleWelcomeEmail(ctx context.Context, e events.WelcomeEmail, d outbox.Delivery) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	sc := trace.SpanContextFromContext(ctx)
	fmt.Fprintf(m.out, "attempt %d of message %d: span %s in trace %s, enqueued under traceparent %s\n",
		d.Attempt, d.MessageID, sc.SpanID(), sc.TraceID(), d.Headers["traceparent"])
	if m.calls == 1 {
		return outbox.RetryAfter(100*time.Millisecond, errors.New("smtp: 421 try again later"))
	}
	fmt.Fprintf(m.out, "welcome mail sent to %s\n", e.Email)
	return nil
}

// deliver runs w until nothing is pending or processing.
func deliver(ctx context.Context, db *sql.DB, w *outbox.Worker) error {
	ctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s, err := outbox.Stats(ctx, db)
		if err == nil && s.Pending == 0 && s.Processing == 0 {
			break
		}
		if err == nil && time.Now().After(deadline) {
			err = errors.New("the mail was not delivered within 30s")
		}
		if err != nil {
			cancel()
			return errors.Join(err, <-errc)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	return <-errc
}
