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
}

var workloadNames = []string{"w1", "w2", "w3", "mem"}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("outboxbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.StringVar(&o.dsn, "dsn", os.Getenv("OUTBOX_TEST_DSN"), "server-level DSN with CREATE DATABASE rights (bench/run starts a throwaway server when none is given)")
	fs.IntVar(&o.rounds, "rounds", 3, "rounds; each reports the median")
	fs.BoolVar(&o.smoke, "smoke", false, "tiny sizes, 1 round: checks that everything runs and nothing is lost")
	only := fs.String("only", strings.Join(workloadNames, ","), "workloads to run: w1 (with L0 tx/s), w2 (with L0 UPDATE rows/s), w3, mem")
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
	memSmall := fs.Int("mem-small", 0, "Memory small backlog (default 20000)")
	memLarge := fs.Int("mem-large", 0, "Memory large backlog (default 200000)")
	fs.IntVar(&oursBatch, "ours-batch", 0, "outboxgen worker BatchSize (0: its default, 100)")
	fs.IntVar(&oursConcurrency, "ours-concurrency", 0, "outboxgen worker Concurrency (0: its default, 16)")
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
	setI(&o.sz.MemSmall, *memSmall)
	setI(&o.sz.MemLarge, *memLarge)
	o.only = strings.Split(*only, ",")
	for _, w := range o.only {
		if !slices.Contains(workloadNames, w) {
			return o, fmt.Errorf("--only: unknown workload %q (have %v)", w, workloadNames)
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

type bench struct {
	o       options
	srv     server
	kind    serverKind
	exe     string
	log     io.Writer
	results []result
}

func (b *bench) wants(workload, sys string) bool {
	return slices.Contains(b.o.only, workload) && slices.Contains(b.o.systems, sys)
}

// record stores one result and logs it as it happens, so a long run shows progress.
func (b *bench) record(r result, err error, took time.Duration) {
	if err != nil {
		r.Err = err.Error()
	}
	b.results = append(b.results, r)
	status := fmt.Sprintf("%.1f %s", r.Value, r.Unit)
	if r.Err != "" {
		status = "ERROR: " + r.Err
	}
	fmt.Fprintf(b.log, "[%s r%d] %-40s %-10s %s (loss %d, dup %d) in %.1fs\n",
		r.Mode, r.Round, r.Workload, r.System, status, r.Loss, r.Dup, took.Seconds())
	if r.Note != "" {
		fmt.Fprintf(b.log, "  %s\n", r.Note)
	}
}

func (b *bench) run(ctx context.Context) {
	for _, mode := range b.o.modes {
		for round := 1; round <= b.o.rounds; round++ {
			if ctx.Err() != nil {
				return
			}
			e := runEnv{srv: b.srv, mode: mode, sz: b.o.sz, round: round, exe: b.exe}
			b.runRound(ctx, e)
		}
	}
}

// runRound runs every selected workload once, systems interleaved: L0, outboxgen, watermill.
func (b *bench) runRound(ctx context.Context, e runEnv) {
	base := result{Mode: e.mode.Name, Round: e.round}
	one := func(workload string, sys system, f func() (result, error)) {
		if !b.wants(workloadKey(workload), sys.name()) || ctx.Err() != nil {
			return
		}
		t := time.Now()
		r, err := f()
		r.Mode, r.Round, r.Workload, r.System = base.Mode, base.Round, workload, sys.name()
		b.record(r, err, time.Since(t))
	}
	systems := allSystems()
	consumers := systems[1:]

	for _, conc := range []int{1, 8} {
		for _, sys := range systems {
			one(fmt.Sprintf("W1 tx/s, %d goroutine(s)", conc), sys, func() (result, error) { return e.runTx(ctx, sys, conc) })
		}
	}

	one("W2 L0 UPDATE 100 ids", limitSystem{}, func() (result, error) { return e.runUpdate(ctx) })
	for _, w := range []int{1, 4} {
		for _, sys := range consumers {
			one(fmt.Sprintf("W2 drain %d, no-op, %d worker(s)", e.sz.DrainN, w), sys, func() (result, error) {
				return e.runDrain(ctx, sys, w, e.sz.DrainN, 0)
			})
		}
	}
	for _, sys := range consumers {
		one(fmt.Sprintf("W2 drain %d, 5 ms handler, 1 worker", e.sz.SlowN), sys, func() (result, error) {
			return e.runDrain(ctx, sys, 1, e.sz.SlowN, slowHandler)
		})
	}

	for _, lc := range latencyCases(consumers) {
		if !b.wants("w3", lc.sys.name()) || ctx.Err() != nil {
			continue
		}
		t := time.Now()
		lr, err := e.runLatency(ctx, lc.sys, lc.delay, lc.xproc)
		took := time.Since(t)
		for _, m := range []struct {
			metric string
			v      float64
		}{{"p50", lr.P50}, {"p95", lr.P95}, {"p99", lr.P99}, {"business tx p99", lr.TxP99}} {
			r := result{Mode: base.Mode, Round: base.Round, System: lc.sys.name(), Unit: "ms",
				Workload: "W3 " + lc.label + ", " + m.metric, Value: m.v}
			if m.metric == "p50" { // count losses once per run
				r.Loss, r.Dup = lr.Loss, lr.Dup
			}
			b.record(r, err, took)
		}
		if lr.Note != "" {
			fmt.Fprintf(b.log, "  %s\n", lr.Note)
		}
		if lr.Lagged > 0 {
			fmt.Fprintf(b.log, "  note: the producer started %d transactions more than 10 ms late\n", lr.Lagged)
		}
	}

	for _, sys := range consumers {
		for _, n := range []int{e.sz.MemSmall, e.sz.MemLarge} {
			one(fmt.Sprintf("Memory peak RSS, backlog %d", n), sys, func() (result, error) { return e.runMemory(ctx, sys, n) })
		}
	}
}

type latencyCase struct {
	label string
	sys   system
	delay time.Duration
	xproc bool
}

// latencyCases: outboxgen in the enqueuing process (InTx wakes the worker) and in another
// process (polling only); watermill in-process (it has no wake-up, so a process boundary
// changes nothing for it).
func latencyCases(consumers []system) []latencyCase {
	var out []latencyCase
	for _, sys := range consumers {
		out = append(out,
			latencyCase{"same process, no-op", sys, 0, false},
			latencyCase{"same process, 5 ms handler", sys, slowHandler, false})
		if sys.name() == "outboxgen" {
			out = append(out,
				latencyCase{"other process, no-op", sys, 0, true},
				latencyCase{"other process, 5 ms handler", sys, slowHandler, true})
		}
	}
	return out
}

func workloadKey(label string) string {
	switch {
	case strings.HasPrefix(label, "W1"):
		return "w1"
	case strings.HasPrefix(label, "W2"):
		return "w2"
	case strings.HasPrefix(label, "W3"):
		return "w3"
	default:
		return "mem"
	}
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
