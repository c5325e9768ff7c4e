// Command orders shows ordering per key. An order's events, order_placed, order_paid and
// order_shipped, share the ordering group "orders", keyed by order_id (events.yaml): the events
// of one order are handled one at a time, in the order their transactions committed, while the
// events of different orders are handled concurrently.
//
// Six customers order at once. Then, for each order, the payment provider's webhook and the
// warehouse's shipping scan arrive together, each in its own transaction that locks the order's
// row, records the change and enqueues its event: which of the two commits first is up to the
// race (these orders are paid on invoice, so they may ship before they are paid). One payment
// is declined after its event was enqueued: that transaction rolls back, its message with it,
// and the webhook's retry pays. Two workers deliver the events as they commit, to handlers that
// take a while; the CRM call of one order's order_placed times out once, and that order's later
// events wait for the retry while the other orders go on. At the end, every order's events were
// handled in the order its transactions committed.
//
//	go run ./examples/orders -dsn 'user:pass@tcp(127.0.0.1:3306)/app?parseTime=true'
//
// The DSN defaults to $OUTBOX_DSN. The program creates its tables (orders, order_history,
// order_handled) and the outbox's, so point it at a database of its own.
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/outboxgen/outboxgen/examples/events"
	"github.com/outboxgen/outboxgen/runtime/outbox"
)

func main() {
	dsn := flag.String("dsn", os.Getenv("OUTBOX_DSN"), "database DSN with parseTime=true (default $OUTBOX_DSN)")
	flag.Parse()
	if *dsn == "" {
		fmt.Fprintln(os.Stderr, "orders: no database: pass -dsn or set OUTBOX_DSN")
		os.Exit(2)
	}
	db, err := sql.Open("mysql", *dsn)
	if err != nil {
		fmt.Fprintln(os.Stderr, "orders:", err)
		os.Exit(1)
	}
	defer db.Close()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, db, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "orders:", err)
		os.Exit(1)
	}
}

var tables = []string{`
CREATE TABLE IF NOT EXISTS orders (
    id             BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    customer_email VARCHAR(191) NOT NULL,
    paid           BOOL         NOT NULL DEFAULT FALSE,
    shipped        BOOL         NOT NULL DEFAULT FALSE,
    version        INT          NOT NULL
) ENGINE = InnoDB`,
	// One row per committed change of an order, written in the transaction that enqueues its
	// event: version follows the order's row lock, so it is the order's commit order.
	`
CREATE TABLE IF NOT EXISTS order_history (
    order_id   BIGINT      NOT NULL,
    version    INT         NOT NULL,
    event_type VARCHAR(64) NOT NULL,
    PRIMARY KEY (order_id, version)
) ENGINE = InnoDB`,
	// One row per handler call, written by the handler: what the workers did, and when.
	`
CREATE TABLE IF NOT EXISTS order_handled (
    id           BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    order_id     BIGINT       NOT NULL,
    event_type   VARCHAR(64)  NOT NULL,
    message_id   BIGINT       NOT NULL,
    ordering_key VARCHAR(191) NOT NULL,
    attempt      INT          NOT NULL,
    outcome      VARCHAR(16)  NOT NULL,
    started_at   DATETIME(6)  NOT NULL,
    finished_at  DATETIME(6)  NOT NULL
) ENGINE = InnoDB`,
}

// The customers who order. Bob's order_placed meets a CRM timeout on its first delivery; Dan's
// first payment is declined after its event was enqueued.
var customers = []string{"ann@example.com", "bob@example.com", "cho@example.com", "dan@example.com", "eve@example.com", "fay@example.com"}

const (
	crmTimeoutFor = "bob@example.com"
	declinedFor   = "dan@example.com"
)

// errDeclined is the payment provider's refusal, which comes after the event was enqueued.
var errDeclined = errors.New("card declined")

func run(ctx context.Context, db *sql.DB, out io.Writer) error {
	if err := outbox.Migrate(ctx, db); err != nil {
		return err
	}
	for _, ddl := range tables {
		if _, err := db.ExecContext(ctx, ddl); err != nil {
			return fmt.Errorf("create tables: %w", err)
		}
	}
	log := &syncWriter{w: out}

	// The workers run from the start: each event is handled as soon as it may be, while the
	// transactions of the other events are still racing.
	h := &fulfilment{db: db, out: log, inFlight: map[int64]int{}}
	workers, err := startWorkers(ctx, db, h, 2)
	if err != nil {
		return err
	}
	produceErr := produce(ctx, db, log)
	drained := waitDrained(ctx, db, log)
	if err := workers.stop(); err != nil {
		drained = errors.Join(drained, err)
	}
	if err := errors.Join(produceErr, drained); err != nil {
		return err
	}
	if len(h.overlaps) > 0 {
		return fmt.Errorf("events of one order ran at the same time: %s", strings.Join(h.overlaps, "; "))
	}
	return report(ctx, db, out)
}

// produce places every order at once, then for each order lets the payment and the shipment
// race, each in its own transaction.
func produce(ctx context.Context, db *sql.DB, out io.Writer) error {
	var wg sync.WaitGroup
	errs := make(chan error, len(customers))
	for i, email := range customers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- lifecycle(ctx, db, out, email, events.Money{Amount: int64(1990 + 1000*i), Currency: events.MoneyCurrencyEUR})
		}()
	}
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
}

func lifecycle(ctx context.Context, db *sql.DB, out io.Writer, email string, total events.Money) error {
	id, err := placeOrder(ctx, db, email, total)
	if err != nil {
		return fmt.Errorf("place %s's order: %w", email, err)
	}
	fmt.Fprintf(out, "order %d placed by %s\n", id, email)

	// The webhook and the scan arrive together, within a few milliseconds of each other.
	var wg sync.WaitGroup
	var payErr, shipErr error
	wg.Add(2)
	go func() {
		defer wg.Done()
		if payErr = sleep(ctx, time.Duration(rand.IntN(10))*time.Millisecond); payErr == nil {
			payErr = pay(ctx, db, out, id, email, total)
		}
	}()
	go func() {
		defer wg.Done()
		if shipErr = sleep(ctx, time.Duration(rand.IntN(10))*time.Millisecond); shipErr == nil {
			shipErr = ship(ctx, db, out, id)
		}
	}()
	wg.Wait()
	return errors.Join(payErr, shipErr)
}

// placeOrder creates the order and enqueues order_placed in one transaction.
func placeOrder(ctx context.Context, db *sql.DB, email string, total events.Money) (id int64, err error) {
	err = outbox.InTx(ctx, db, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, "INSERT INTO orders (customer_email, version) VALUES (?, 1)", email)
		if err != nil {
			return err
		}
		if id, err = res.LastInsertId(); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO order_history (order_id, version, event_type) VALUES (?, 1, 'order_placed')", id); err != nil {
			return err
		}
		_, err = events.EnqueueOrderPlaced(ctx, tx, events.OrderPlaced{OrderID: id, CustomerEmail: email, Total: total})
		return err
	})
	return id, err
}

// pay is the payment provider's webhook: it retries until the payment is captured.
func pay(ctx context.Context, db *sql.DB, out io.Writer, id int64, email string, total events.Money) error {
	for attempt := 1; ; attempt++ {
		paymentID := fmt.Sprintf("pay-%d-%d", id, attempt)
		err := change(ctx, db, id, "paid", func(tx *sql.Tx) error {
			if _, err := events.EnqueueOrderPaid(ctx, tx, events.OrderPaid{OrderID: id, PaymentID: paymentID, Amount: total}); err != nil {
				return err
			}
			// The provider answers after the event was enqueued: a refusal rolls back the
			// change and the message together.
			if email == declinedFor && attempt == 1 {
				return errDeclined
			}
			return nil
		})
		switch {
		case err == nil:
			fmt.Fprintf(out, "order %d paid (%s)\n", id, paymentID)
			return nil
		case errors.Is(err, errDeclined):
			fmt.Fprintf(out, "order %d: payment %s declined after its order_paid was enqueued: rolled back, nothing sent; the webhook retries\n", id, paymentID)
		default:
			return fmt.Errorf("pay order %d: %w", id, err)
		}
	}
}

// ship is the warehouse's scan.
func ship(ctx context.Context, db *sql.DB, out io.Writer, id int64) error {
	tracking := fmt.Sprintf("JD%06d", id)
	err := change(ctx, db, id, "shipped", func(tx *sql.Tx) error {
		_, err := events.EnqueueOrderShipped(ctx, tx, events.OrderShipped{OrderID: id, Carrier: events.OrderShippedCarrierDhl, TrackingNumber: tracking})
		return err
	})
	if err != nil {
		return fmt.Errorf("ship order %d: %w", id, err)
	}
	fmt.Fprintf(out, "order %d shipped (%s)\n", id, tracking)
	return nil
}

// change records one change of an order and enqueues its event in one transaction. It locks
// the order's row first, then enqueues: the same lock order on every path, so two changes of
// one order wait for each other instead of deadlocking (docs/ordering.md). The row
// lock already orders them, so the ordering key's own lock adds no wait.
func change(ctx context.Context, db *sql.DB, id int64, column string, enqueue func(tx *sql.Tx) error) error {
	return outbox.InTx(ctx, db, func(tx *sql.Tx) error {
		var version int
		if err := tx.QueryRowContext(ctx, "SELECT version FROM orders WHERE id = ? FOR UPDATE", id).Scan(&version); err != nil {
			return err
		}
		version++
		// column is "paid" or "shipped", never input.
		if _, err := tx.ExecContext(ctx, "UPDATE orders SET "+column+" = TRUE, version = ? WHERE id = ?", version, id); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO order_history (order_id, version, event_type) VALUES (?, ?, ?)", id, version, "order_"+column); err != nil {
			return err
		}
		if err := enqueue(tx); err != nil {
			return err
		}
		// Some work before the commit, so that the two changes of an order overlap.
		return sleep(ctx, time.Duration(rand.IntN(15))*time.Millisecond)
	})
}

// fulfilment handles the three events of an order. Each call takes a while (the CRM is the
// slowest), so without ordering a quick order_shipped would often finish before its order's
// order_placed; it records every call in order_handled.
type fulfilment struct {
	db  *sql.DB
	out io.Writer

	mu       sync.Mutex
	inFlight map[int64]int // handler calls running, by order
	overlaps []string      // calls that started while another of their order ran
}

func (h *fulfilment) HandleOrderPlaced(ctx context.Context, e events.OrderPlaced, d outbox.Delivery) error {
	return h.handle(ctx, e.OrderID, d, 40*time.Millisecond, func() error {
		if e.CustomerEmail == crmTimeoutFor && d.Attempt == 1 {
			// A quick retry for the demo (the catalog's backoff starts at 1s). Until it
			// succeeds, order_paid and order_shipped of this order wait; other orders do not.
			return outbox.RetryAfter(500*time.Millisecond, errors.New("crm: timeout"))
		}
		return nil
	})
}

func (h *fulfilment) HandleOrderPaid(ctx context.Context, e events.OrderPaid, d outbox.Delivery) error {
	return h.handle(ctx, e.OrderID, d, 15*time.Millisecond, nil)
}

func (h *fulfilment) HandleOrderShipped(ctx context.Context, e events.OrderShipped, d outbox.Delivery) error {
	return h.handle(ctx, e.OrderID, d, 5*time.Millisecond, nil)
}

// handle does an event's work (took, then fail), checks that no other event of its order is
// being handled meanwhile, and records the call.
func (h *fulfilment) handle(ctx context.Context, orderID int64, d outbox.Delivery, took time.Duration, fail func() error) error {
	h.mu.Lock()
	if h.inFlight[orderID] > 0 {
		h.overlaps = append(h.overlaps, fmt.Sprintf("order %d's %s (message %d) while another of its events ran", orderID, d.EventType, d.MessageID))
	}
	h.inFlight[orderID]++
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.inFlight[orderID]--
		h.mu.Unlock()
	}()

	started := time.Now().UTC()
	if err := sleep(ctx, took); err != nil {
		return err
	}
	var failed error
	if fail != nil {
		failed = fail()
	}
	outcome := "ok"
	if failed != nil {
		outcome = "failed"
	}
	if _, err := h.db.ExecContext(ctx, `INSERT INTO order_handled (order_id, event_type, message_id, ordering_key, attempt, outcome, started_at, finished_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, orderID, d.EventType, d.MessageID, d.OrderingKey, d.Attempt, outcome, started, time.Now().UTC()); err != nil {
		return err
	}
	if failed != nil {
		fmt.Fprintf(h.out, "  handled order %d %s, attempt %d: %v; the order's later events wait for the retry\n", orderID, d.EventType, d.Attempt, failed)
		return failed
	}
	fmt.Fprintf(h.out, "  handled order %d %s (key %s)\n", orderID, d.EventType, d.OrderingKey)
	return nil
}

type workerGroup struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	errs   chan error
}

// startWorkers starts n workers on db, each with its own router over h's three events.
func startWorkers(ctx context.Context, db *sql.DB, h *fulfilment, n int) (*workerGroup, error) {
	ctx, cancel := context.WithCancel(ctx)
	g := &workerGroup{cancel: cancel, errs: make(chan error, n)}
	for range n {
		router := outbox.NewRouter() // events.NewRouter(h) when h handles every event of the catalog
		events.RegisterOrderPlaced(router, h)
		events.RegisterOrderPaid(router, h)
		events.RegisterOrderShipped(router, h)
		w, err := outbox.NewWorker(db, router, outbox.Config{PollInterval: 100 * time.Millisecond})
		if err != nil {
			g.cancel()
			g.wg.Wait()
			return nil, err
		}
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			g.errs <- w.Run(ctx)
		}()
	}
	return g, nil
}

// stop stops the workers and returns once their in-flight results are recorded.
func (g *workerGroup) stop() error {
	g.cancel()
	g.wg.Wait()
	close(g.errs)
	var all []error
	for err := range g.errs {
		all = append(all, err)
	}
	return errors.Join(all...)
}

// waitDrained polls outbox.Stats until no message is pending or processing, and says once when
// an ordering key is held (its head waiting for a retry, with messages behind it).
func waitDrained(ctx context.Context, db *sql.DB, out io.Writer) error {
	deadline := time.Now().Add(30 * time.Second)
	sawHeld := false
	for {
		s, err := outbox.Stats(ctx, db)
		if err != nil {
			return err
		}
		if s.Pending == 0 && s.Processing == 0 {
			return nil
		}
		if !sawHeld && len(s.Held) > 0 {
			sawHeld = true
			k := s.Held[0]
			fmt.Fprintf(out, "  outbox.Stats: key %s held by message %d (%s), %d waiting behind it\n", k.OrderingKey, k.Head, k.HeadStatus, k.Waiting)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not drained after 30s: %d pending, %d processing, %d failed", s.Pending, s.Processing, s.Failed)
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
}

// report prints, for every order, the order in which its changes committed and the order in
// which its events were handled, and fails if they differ.
func report(ctx context.Context, db *sql.DB, out io.Writer) error {
	committed, err := perOrder(ctx, db, "SELECT order_id, event_type FROM order_history ORDER BY order_id, version")
	if err != nil {
		return err
	}
	handled, err := perOrder(ctx, db, "SELECT order_id, event_type FROM order_handled WHERE outcome = 'ok' ORDER BY order_id, id")
	if err != nil {
		return err
	}
	fmt.Fprintln(out)
	var wrong []string
	for _, id := range slices.Sorted(maps.Keys(committed)) {
		c, h := committed[id], handled[id]
		fmt.Fprintf(out, "order %d: committed %s; handled %s\n", id, strings.Join(c, ", "), strings.Join(h, ", "))
		if !slices.Equal(c, h) {
			wrong = append(wrong, fmt.Sprint(id))
		}
	}
	if len(wrong) > 0 {
		return fmt.Errorf("orders %s: events handled out of commit order", strings.Join(wrong, ", "))
	}
	_, err = fmt.Fprintf(out, "\nevery order's events were handled one at a time, in the order their transactions committed (%d orders)\n", len(committed))
	return err
}

func perOrder(ctx context.Context, db *sql.DB, query string) (map[int64][]string, error) {
	rows, err := db.QueryContext(ctx, query)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[int64][]string{}
	for rows.Next() {
		var id int64
		var eventType string
		if err := rows.Scan(&id, &eventType); err != nil {
			return nil, err
		}
		out[id] = append(out[id], strings.TrimPrefix(eventType, "order_"))
	}
	return out, rows.Err()
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// syncWriter lets the producers and the handlers print lines at once.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
