// Command outboxbench measures outboxgen next to the database's own limit (L0) and
// ThreeDotsLabs/watermill-sql v4 on the same MariaDB or MySQL server, interleaved per round, each
// run in a fresh database, and prints medians and ratios as a markdown table. See bench/README.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strings"
	"time"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "child" {
		os.Exit(childMain(os.Args[2:]))
	}
	os.Exit(benchMain(os.Args[1:], os.Stdout, os.Stderr))
}

type options struct {
	dsn      string
	rounds   int
	smoke    bool
	only     []string
	systems  []string
	modes    []dsnMode
	sz       sizes
	markdown string // also write the table here
	cpuProf  string // CPU profile of this process (workloads in-process)
	// xprocRounds: W3 across processes runs in the first xprocRounds rounds of each driver mode
	// only (default 1), so that its cases (both systems, two rates) cost a full run about as
	// much time as its two outboxgen-only cases did at 3 rounds.
	xprocRounds int
}

// Workloads: w3 is W3 with the consumer in the producer's process, w3x with the consumer in a
// child process (both systems at LatencyRate and SporadicRate), idle the idle cost. ordered
// adds outboxgen's W1 and W2 with ordering keys, otel W1 and W2 with
// runtime/outboxotel wired; each also runs the plain outboxgen rows it is compared with (and
// ordered L0's W1), interleaved in the same rounds.
var workloadNames = []string{"w1", "w2", "w3", "w3x", "idle", "mem", "ordered", "otel", "backfill"}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("outboxbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.StringVar(&o.dsn, "dsn", os.Getenv("OUTBOX_TEST_DSN"), "server-level DSN with CREATE DATABASE rights (bench/run starts a throwaway server when none is given)")
	fs.IntVar(&o.rounds, "rounds", 3, "rounds; each reports the median")
	fs.BoolVar(&o.smoke, "smoke", false, "tiny sizes, 1 round: checks that everything runs and nothing is lost")
	only := fs.String("only", strings.Join(workloadNames, ","), "workloads to run: w1 (with L0 tx/s), w2 (with L0 UPDATE rows/s), w3 (consumer in this process), w3x (consumer in a child process), idle, mem, ordered (W1 and W2 drains with ordering keys), otel (W1 and W2 with outboxotel wired), backfill (messages in one transaction: L0 multi-row INSERTs, EnqueueMany, one Enqueue each), retention-load (W2 and W1 while the cleaner deletes a SENT backlog), history (W2 with a long SENT history, and under a held snapshot), steady (a paced producer with short retention, sampled); the last three run only when named")
	systems := fs.String("systems", "L0,outboxgen,watermill", "systems to run")
	modes := fs.String("modes", "default,interpolate", "driver settings: default, interpolate (interpolateParams=true)")
	fs.StringVar(&o.markdown, "out", "", "also write the markdown report to this file")
	fs.StringVar(&o.cpuProf, "cpuprofile", "", "write a CPU profile of the bench process (consumers and producers in-process) to this file")
	// Size overrides, for a shorter run; the defaults are the sizes.
	txDur := fs.Duration("tx-dur", 0, "duration of each L0/W1 throughput run (default 5s)")
	drainN := fs.Int("drain-n", 0, "W2 no-op backlog (default 50000)")
	slowN := fs.Int("slow-n", 0, "W2 5 ms-handler backlog (default 2000)")
	latDur := fs.Duration("lat-dur", 0, "W3 duration (default 20s)")
	latRate := fs.Int("lat-rate", 0, "W3 rate, tx/s (default 300)")
	sporadicRate := fs.Int("sporadic-rate", 0, "W3 across processes, sporadic traffic rate, tx/s (default 20)")
	idleWait := fs.Duration("idle-wait", 0, "Idle: time without traffic before counting (default 30s; 3s with --smoke)")
	idleWindow := fs.Duration("idle-window", 0, "Idle: counting window (default 10s; 2s with --smoke)")
	fs.IntVar(&o.xprocRounds, "xproc-rounds", 1, "W3 across processes (w3x) runs in the first N rounds of each driver mode")
	memSmall := fs.Int("mem-small", 0, "Memory small backlog (default 20000)")
	memLarge := fs.Int("mem-large", 0, "Memory large backlog (default 200000)")
	orderedKeys := fs.Int("ordered-keys", 0, "ordered: keys the messages spread over, round-robin (default 1000; 50 with --smoke)")
	serialN := fs.Int("serial-n", 0, "ordered: backlog of the drain over 1 key (default 300)")
	backfillN := fs.Int("backfill-n", 0, "backfill: messages in the one transaction (default 100000)")
	fs.IntVar(&oursBatch, "ours-batch", 0, "outboxgen worker BatchSize (0: its default, 100)")
	fs.IntVar(&oursConcurrency, "ours-concurrency", 0, "outboxgen worker Concurrency (0: its default, 16)")
	applyRet := retentionFlags(fs)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.dsn == "" {
		return o, fmt.Errorf("no --dsn and no OUTBOX_TEST_DSN: use bench/run, which starts a throwaway server")
	}
	o.sz = fullSizes
	if o.smoke {
		o.sz = smokeSizes
		o.rounds = 1
	}
	setD := func(dst *time.Duration, v time.Duration) {
		if v > 0 {
			*dst = v
		}
	}
	setI := func(dst *int, v int) {
		if v > 0 {
			*dst = v
		}
	}
	setD(&o.sz.TxDuration, *txDur)
	setI(&o.sz.DrainN, *drainN)
	setI(&o.sz.SlowN, *slowN)
	setD(&o.sz.LatencyDur, *latDur)
	setI(&o.sz.LatencyRate, *latRate)
	setI(&o.sz.SporadicRate, *sporadicRate)
	setD(&o.sz.IdleWait, *idleWait)
	setD(&o.sz.IdleWindow, *idleWindow)
	setI(&o.sz.MemSmall, *memSmall)
	setI(&o.sz.MemLarge, *memLarge)
	setI(&o.sz.OrderedKeys, *orderedKeys)
	setI(&o.sz.SerialN, *serialN)
	setI(&o.sz.BackfillN, *backfillN)
	applyRet(&o)
	o.only = strings.Split(*only, ",")
	for _, w := range o.only {
		if !slices.Contains(workloadNames, w) && !slices.Contains(retWorkloadNames, w) {
			return o, fmt.Errorf("--only: unknown workload %q (have %v, and by name only %v)", w, workloadNames, retWorkloadNames)
		}
	}
	o.systems = strings.Split(*systems, ",")
	for _, s := range o.systems {
		if _, err := systemByName(s); err != nil {
			return o, fmt.Errorf("--systems: %w", err)
		}
	}
	for _, m := range strings.Split(*modes, ",") {
		i := slices.IndexFunc(dsnModes, func(d dsnMode) bool { return d.Name == m })
		if i < 0 {
			return o, fmt.Errorf("--modes: unknown mode %q", m)
		}
		o.modes = append(o.modes, dsnModes[i])
	}
	if o.rounds < 1 {
		return o, fmt.Errorf("--rounds must be >= 1")
	}
	return o, nil
}

func benchMain(args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if err != nil {
		if err != flag.ErrHelp {
			fmt.Fprintln(stderr, "outboxbench:", err)
		}
		return 2
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	defer cancel()
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, "outboxbench:", err)
		return 1
	}
	srv := server{dsn: o.dsn}
	kind, err := srv.kind(ctx)
	if err != nil {
		fmt.Fprintln(stderr, "outboxbench: server version:", err)
		return 1
	}
	wmOnMySQL = kind.isMySQL()
	fmt.Fprintf(stderr, "outboxbench: server %s\n", kind)
	settings, err := srv.settings(ctx)
	if err != nil {
		fmt.Fprintln(stderr, "outboxbench: server settings:", err)
		return 1
	}
	if o.cpuProf != "" {
		f, err := os.Create(o.cpuProf)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(stderr, "outboxbench: cpuprofile:", err)
			return 1
		}
		defer func() {
			pprof.StopCPUProfile()
			if err := f.Close(); err != nil {
				fmt.Fprintln(stderr, "outboxbench: cpuprofile:", err)
			}
		}()
	}
	b := &bench{o: o, srv: srv, kind: kind, exe: exe, log: stderr}
	if slices.Contains(o.only, "otel") && slices.Contains(o.systems, "outboxgen") {
		b.otel = setupOTel()
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := b.otel.shutdown(sctx); err != nil {
				fmt.Fprintln(stderr, "outboxbench: otel shutdown:", err)
			}
		}()
	}
	start := time.Now()
	b.run(ctx)
	report := b.report(settings, time.Since(start))
	fmt.Fprint(stdout, report)
	if o.markdown != "" {
		if err := os.WriteFile(o.markdown, []byte(report), 0o644); err != nil {
			fmt.Fprintln(stderr, "outboxbench:", err)
			return 1
		}
	}
	if warn := b.watermillLosses(); len(warn) > 0 {
		fmt.Fprintf(stderr, "outboxbench: watermill-sql lost or duplicated messages (reported in the table; not a failure of this command):\n  %s\n", strings.Join(warn, "\n  "))
	}
	if bad := b.failures(); len(bad) > 0 {
		fmt.Fprintf(stderr, "outboxbench: %d run(s) failed or lost/duplicated messages:\n  %s\n", len(bad), strings.Join(bad, "\n  "))
		return 1
	}
	return 0
}

// otelLabel marks the rows of the otel workload: outboxotel wired (the plain outboxgen row of the
// same label without it is the unwired baseline).
const otelLabel = "OTel wired"

// orderedLabel marks the rows of the ordered workload.
func orderedLabel(keys int) string {
	if keys == 1 {
		return "ordered, 1 key"
	}
	return fmt.Sprintf("ordered, %d keys", keys)
}

type latencyCase struct {
	key   string // w3 or w3x
	label string
	sys   system
	delay time.Duration
	xproc bool
	rate  int
}

// latencyCases: W3 with the consumer in the enqueuing process (outboxgen's InTx wakes the
// worker; watermill has no wake-up), and W3 across processes (the consumer in a child process,
// no wake-up: the worker polls) for both systems at LatencyRate and at SporadicRate, and
// outboxgen's 5 ms handler at LatencyRate.
func latencyCases(consumers []system, sz sizes) []latencyCase {
	var out []latencyCase
	for _, sys := range consumers {
		out = append(out,
			latencyCase{"w3", "same process, no-op", sys, 0, false, sz.LatencyRate},
			latencyCase{"w3", "same process, 5 ms handler", sys, slowHandler, false, sz.LatencyRate})
	}
	for _, rate := range []int{sz.LatencyRate, sz.SporadicRate} {
		for _, sys := range consumers {
			out = append(out, latencyCase{"w3x", fmt.Sprintf("other process, no-op, %d tx/s", rate), sys, 0, true, rate})
		}
	}
	for _, sys := range consumers {
		if sys.name() == "outboxgen" {
			out = append(out, latencyCase{"w3x", fmt.Sprintf("other process, 5 ms handler, %d tx/s", sz.LatencyRate), sys, slowHandler, true, sz.LatencyRate})
		}
	}
	return out
}

// perMsg is count / n, or -1 (not measured) when count is negative.
func perMsg(count int64, n int) float64 {
	if count < 0 || n == 0 {
		return -1
	}
	return float64(count) / float64(n)
}

// failures lists runs that errored, and runs of outboxgen (or L0) that lost or duplicated
// messages: any of these fails the command, so the smoke run in scripts/test catches them.
func (b *bench) failures() []string {
	var out []string
	for _, r := range b.results {
		if r.Err != "" || (r.System != "watermill" && (r.Loss != 0 || r.Dup != 0)) {
			out = append(out, fmt.Sprintf("[%s r%d] %s %s: loss %d dup %d %s", r.Mode, r.Round, r.Workload, r.System, r.Loss, r.Dup, r.Err))
		}
	}
	return out
}

// watermillLosses lists watermill runs with losses or duplicates. Its offset-based subscriber
// acknowledges an offset past a message whose transaction committed after a higher offset's
// (concurrent publishers), and never delivers that message: a property of the system under
// comparison, shown in the table, not a reason to fail the benchmark.
func (b *bench) watermillLosses() []string {
	var out []string
	for _, r := range b.results {
		if r.System == "watermill" && r.Err == "" && (r.Loss != 0 || r.Dup != 0) {
			out = append(out, fmt.Sprintf("[%s r%d] %s: loss %d dup %d", r.Mode, r.Round, r.Workload, r.Loss, r.Dup))
		}
	}
	return out
}
