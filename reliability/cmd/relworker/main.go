// Command relworker is the fault suite's worker process: one outbox.Worker whose handler for
// "rel.msg" (and, with -ordered, for the ordered types "rel.ord.placed" and "rel.ord.paid")
// appends every call to a ledger file (see reliability/internal/ledger) and behaves as the
// message's payload says (succeed, fail, panic, hang...). The suite starts, kills -9 and
// restarts it; it stops on SIGTERM or SIGINT by cancelling Run's context.
//
// With -produce-rate it also enqueues "rel.msg" messages itself, through outbox.InTx on the
// *sql.DB its worker runs on, so that they take InTx's handoff to that worker (produce.go);
// SIGUSR1 stops the enqueueing and leaves the worker running.
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/outboxgen/outboxgen/reliability/internal/ledger"
	"github.com/outboxgen/outboxgen/runtime/incident"
	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// EventType is the type relworker handles; any other type stays PENDING for it, except the
// OrderedTypes with -ordered.
const EventType = "rel.msg"

// OrderedTypes are the ordering scenario's event types: the suite enqueues them with an
// outbox.Message.OrderingKey shared by both (like two events of one ordering group). The
// handler is the same; its ledger lines carry Delivery.OrderingKey. Only the real worker
// handles them (the relstub stand-in knows rel.msg only).
var OrderedTypes = []string{"rel.ord.placed", "rel.ord.paid"}

// Payload says how the handler behaves for one message. The seq also lives in the
// idempotency key ("seq:N"), so even a payload that does not decode is traceable.
type Payload struct {
	Seq  int64  `json:"seq"`
	Mode string `json:"mode"` // ok (default), fail, failuntil, slowuntil, perm, panic, hang, lateok
	MS   int    `json:"ms"`   // ok: work time (honours ctx); hang: time spent ignoring ctx
	// Until: failuntil fails attempts below Until, then succeeds; slowuntil works MS (honouring
	// ctx, so past the timeout it fails with the deadline) on attempts below Until, then succeeds.
	Until int `json:"until"`
	// Key is an ordered message's business key (the suite's record, for a reader of the
	// ledger); the handler does not act on it: the order is the worker's to keep.
	Key string `json:"key,omitempty"`
	// Prefix comes before "seq:N" in the idempotency key of a message a relworker enqueued
	// itself (-produce-prefix), which keeps its keys apart from other processes'.
	Prefix string `json:"pfx,omitempty"`
}

func main() { os.Exit(run()) }

func run() int {
	var (
		dsn         = flag.String("dsn", "", "DSN of the outbox database")
		ledgerPath  = flag.String("ledger", "", "ledger file to append to")
		proc        = flag.String("proc", "", "process name in the ledger")
		batch       = flag.Int("batch", 16, "Config.BatchSize")
		concurrency = flag.Int("concurrency", 8, "Config.Concurrency")
		poll        = flag.Duration("poll", 100*time.Millisecond, "Config.PollInterval")
		stale       = flag.Duration("stale", 2*time.Second, "Config.StaleAfter")
		shutdown    = flag.Duration("shutdown", 3*time.Second, "Config.ShutdownTimeout")
		timeout     = flag.Duration("timeout", 500*time.Millisecond, "handler timeout (Policy.Timeout)")
		backoff     = flag.Duration("backoff", 50*time.Millisecond, "Policy.Backoff.Initial (Max is 4x)")
		memEvery    = flag.Duration("mem", time.Second, "memory sample interval in the ledger")
		maxConns    = flag.Int("maxconns", 0, "SetMaxOpenConns (0 = unlimited)")
		ordered     = flag.Bool("ordered", false, "also handle the ordered event types (OrderedTypes)")
		rateLimit   = flag.String("rate-limit", "", `Policy.RateLimit as events.yaml writes it, "50/s" or "3/m" ("" = none)`)
		typeConc    = flag.Int("type-concurrency", 0, "Policy.Concurrency (0 = none)")
		produceRate = flag.Int("produce-rate", 0, "enqueue this many rel.msg messages per second through outbox.InTx on the worker's *sql.DB (0 = none)")
		producers   = flag.Int("producers", 2, "with -produce-rate: goroutines that share the rate")
		prefix      = flag.String("produce-prefix", "", `with -produce-rate: idempotency key prefix (default: the -proc name and "/")`)
		lag         = flag.Duration("produce-lag", 0, "with -produce-rate: wait this long after InTx returns before writing the outcome lines (widens the window in which a kill leaves a committed message without one)")
	)
	// Before anything else: SIGUSR1's default action would kill the process.
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	flag.Parse()
	if *dsn == "" || *ledgerPath == "" || *proc == "" {
		fmt.Fprintln(os.Stderr, "relworker: -dsn, -ledger and -proc are required")
		return 2
	}
	lw, err := ledger.Create(*ledgerPath, *proc)
	if err != nil {
		fmt.Fprintln(os.Stderr, "relworker:", err)
		return 1
	}
	defer lw.Close()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})).With("proc", *proc)
	mustLog := func(l ledger.Line) {
		// A ledger line that cannot be written makes the whole run unprovable: stop loudly.
		if err := lw.Write(l); err != nil {
			logger.Error("ledger write failed", "err", err)
			os.Exit(3)
		}
	}
	mustLog(ledger.Line{T: ledger.KindStart, Subject: strconv.Itoa(os.Getpid())})

	db, err := sql.Open("mysql", *dsn)
	if err != nil {
		logger.Error("open", "err", err)
		return 1
	}
	defer db.Close()
	db.SetMaxOpenConns(*maxConns)

	pol := outbox.Policy{
		Backoff:     outbox.Backoff{Initial: *backoff, Max: 4 * *backoff},
		Timeout:     *timeout,
		Concurrency: *typeConc,
	}
	if pol.RateLimit, err = parseRate(*rateLimit); err != nil {
		fmt.Fprintln(os.Stderr, "relworker: -rate-limit:", err)
		return 2
	}
	reporter := incident.Func(func(ctx context.Context, in incident.Incident) {
		e := ""
		if in.Err != nil {
			e = in.Err.Error()
		}
		mustLog(ledger.Line{T: ledger.KindIncident, Kind: string(in.Kind), Subject: in.Subject, Err: e})
		incident.Slog(logger).Report(ctx, in)
	})
	cfg := workerConfig{
		BatchSize: *batch, Concurrency: *concurrency, PollInterval: *poll,
		StaleAfter: *stale, ShutdownTimeout: *shutdown, Logger: logger, Reporter: reporter,
		Types: []string{EventType},
	}
	if *ordered {
		cfg.Types = append(cfg.Types, OrderedTypes...)
	}
	cfg.Types = append(cfg.Types, outageTypes()...) // outage.go

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	go func() {
		t := time.NewTicker(*memEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				mustLog(ledger.Line{T: ledger.KindMem, Heap: ms.HeapInuse, RSS: rss()})
			}
		}
	}()

	var produced sync.WaitGroup
	if *produceRate > 0 {
		pfx := *prefix
		if pfx == "" {
			pfx = *proc + "/"
		}
		pctx, stopProducing := context.WithCancel(ctx)
		defer stopProducing()
		go func() {
			select {
			case <-usr1:
				logger.Info("producers stopping", "signal", "SIGUSR1")
				stopProducing()
			case <-pctx.Done():
			}
		}()
		produced.Add(1)
		go func() {
			defer produced.Done()
			produce(pctx, producer{db: db, rate: *produceRate, goroutines: *producers, prefix: pfx, lag: *lag, log: mustLog, logger: logger})
			mustLog(ledger.Line{T: ledger.KindProduced})
		}()
	}

	err = runWorker(ctx, db, pol, handler(mustLog), cfg)
	produced.Wait()
	e := ""
	if err != nil {
		e = err.Error()
	}
	mustLog(ledger.Line{T: ledger.KindExit, Err: e})
	if err != nil {
		logger.Error("Run", "err", err)
		return 1
	}
	return 0
}

// workerConfig mirrors outbox.Config, so the stand-in worker (build tag relstub) can share main.
type workerConfig struct {
	BatchSize, Concurrency                    int
	PollInterval, StaleAfter, ShutdownTimeout time.Duration
	Logger                                    *slog.Logger
	Reporter                                  incident.Reporter
	// Types are the event types to handle, all with the one handler and policy.
	Types []string
}

func handler(log func(ledger.Line)) outbox.HandlerFunc {
	return func(ctx context.Context, raw json.RawMessage, d outbox.Delivery) (err error) {
		id := int64(d.MessageID)
		log(ledger.Line{T: ledger.KindCall, ID: id, Key: d.IdempotencyKey, Token: d.ClaimToken, Attempt: d.Attempt, Ord: d.OrderingKey})
		// The done line is written before the worker records the result, so a SENT row's
		// claim always has one; a panic is logged as a failure and keeps unwinding into the
		// worker, which must treat it as an error.
		defer func() {
			if r := recover(); r != nil {
				log(ledger.Line{T: ledger.KindDone, ID: id, Token: d.ClaimToken, Ord: d.OrderingKey, Err: fmt.Sprintf("panic: %v", r)})
				panic(r)
			}
			l := ledger.Line{T: ledger.KindDone, ID: id, Token: d.ClaimToken, Ord: d.OrderingKey, OK: err == nil}
			if err != nil {
				l.Err = err.Error()
			}
			log(l)
		}()
		if inOutage(d.EventType) { // outage.go
			return errOutage
		}
		var p Payload
		if err := json.Unmarshal(raw, &p); err != nil {
			// What generated handler wrappers do with a payload that does not decode.
			return outbox.Permanent(fmt.Errorf("decode %s payload: %w", d.EventType, err))
		}
		if want := p.Prefix + "seq:" + strconv.FormatInt(p.Seq, 10); want != d.IdempotencyKey {
			return outbox.Permanent(fmt.Errorf("payload seq %d does not match key %q", p.Seq, d.IdempotencyKey))
		}
		switch p.Mode {
		case "", "ok":
			if p.MS > 0 {
				select {
				case <-time.After(time.Duration(p.MS) * time.Millisecond):
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return nil
		case "fail":
			return errors.New("designed to fail")
		case "failuntil":
			if d.Attempt < p.Until {
				return fmt.Errorf("designed to fail until attempt %d", p.Until)
			}
			return nil
		case "slowuntil":
			if d.Attempt < p.Until {
				select {
				case <-time.After(time.Duration(p.MS) * time.Millisecond):
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return nil
		case "perm":
			return outbox.Permanent(errors.New("designed to fail permanently"))
		case "panic":
			panic("designed to panic")
		case "hang":
			// Ignores its context on purpose: the worker can only report it and move on.
			time.Sleep(time.Duration(p.MS) * time.Millisecond)
			return errors.New("hung past its timeout")
		case "lateok":
			// Succeeds after its deadline: still a success; the fence decides whether it lands.
			<-ctx.Done()
			return nil
		default:
			return outbox.Permanent(fmt.Errorf("unknown mode %q", p.Mode))
		}
	}
}

// rss is the process's resident set size from /proc (0 where unavailable).
func rss() uint64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return 0
	}
	return pages * uint64(os.Getpagesize())
}
