// One benchmark run: which workloads and systems it measures, its rounds, and what it records.

package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"
)

type bench struct {
	o       options
	srv     server
	kind    serverKind
	exe     string
	log     io.Writer
	results []result
	otel    *otelWiring // set when the otel workload runs
}

func (b *bench) wants(workload, sys string) bool {
	return slices.Contains(b.o.only, workload) && slices.Contains(b.o.systems, sys)
}

// wantsAny: sys is selected and so is one of workloads.
func (b *bench) wantsAny(sys string, workloads ...string) bool {
	for _, w := range workloads {
		if b.wants(w, sys) {
			return true
		}
	}
	return false
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

// runRound runs every selected workload once, systems interleaved: L0, outboxgen (then its
// traced and ordered variants), watermill.
func (b *bench) runRound(ctx context.Context, e runEnv) {
	base := result{Mode: e.mode.Name, Round: e.round}
	// one runs workload (the row's label) of sys when sys is selected with one of keys.
	one := func(keys []string, workload string, sys system, f func() (result, error)) {
		if !b.wantsAny(sys.name(), keys...) || ctx.Err() != nil {
			return
		}
		t := time.Now()
		r, err := f()
		r.Mode, r.Round, r.Workload, r.System = base.Mode, base.Round, workload, sys.name()
		b.record(r, err, time.Since(t))
	}
	keys := func(k ...string) []string { return k }
	systems := allSystems()
	consumers := systems[1:]
	ordered := oursSystem{orderedKeys: e.sz.OrderedKeys}
	serial := oursSystem{orderedKeys: 1}
	traced := oursSystem{traced: true}

	// W1: plain outboxgen is the baseline of both variants; L0 also that of ordered (the
	// W1 / L0 ratio that earlier runs report).
	for _, conc := range []int{1, 8} {
		label := fmt.Sprintf("W1 tx/s, %d goroutine(s)", conc)
		for _, sys := range systems {
			var k []string
			switch sys.name() {
			case "L0":
				k = keys("w1", "ordered")
			case "outboxgen":
				k = keys("w1", "ordered", "otel")
			default:
				k = keys("w1")
			}
			one(k, label, sys, func() (result, error) { return e.runTx(ctx, sys, conc, nil) })
			if sys.name() != "outboxgen" {
				continue
			}
			one(keys("otel"), label+", "+otelLabel, traced, func() (result, error) {
				return e.runTx(ctx, traced, conc, tracedTxCheck(b.otel))
			})
			one(keys("ordered"), label+", "+orderedLabel(e.sz.OrderedKeys), ordered, func() (result, error) {
				return e.runTx(ctx, ordered, conc, orderedTxCheck(e.sz.OrderedKeys))
			})
		}
	}

	one(keys("w2"), "W2 L0 UPDATE 100 ids", limitSystem{}, func() (result, error) { return e.runUpdate(ctx) })
	for _, w := range []int{1, 4} {
		label := fmt.Sprintf("W2 drain %d, no-op, %d worker(s)", e.sz.DrainN, w)
		for _, sys := range consumers {
			k := keys("w2")
			switch {
			case w == 1 && sys.name() == "outboxgen":
				k = keys("w2", "ordered", "otel")
			case sys.name() == "outboxgen":
				k = keys("w2", "otel")
			}
			one(k, label, sys, func() (result, error) { return e.runDrain(ctx, sys, w, e.sz.DrainN, 0, nil) })
			if sys.name() != "outboxgen" {
				continue
			}
			one(keys("otel"), label+", "+otelLabel, traced, func() (result, error) {
				chk, err := tracedDrainCheck(ctx, b.otel)
				if err != nil {
					return result{}, err
				}
				return e.runDrain(ctx, traced, w, e.sz.DrainN, 0, chk)
			})
			if w != 1 {
				continue
			}
			one(keys("ordered"), label+", "+orderedLabel(e.sz.OrderedKeys), ordered, func() (result, error) {
				return e.runDrain(ctx, ordered, w, e.sz.DrainN, 0, orderedDrainCheck(e.sz.DrainN, e.sz.OrderedKeys))
			})
			one(keys("ordered"), fmt.Sprintf("W2 drain %d, no-op, %d worker(s), %s", e.sz.SerialN, w, orderedLabel(1)), serial, func() (result, error) {
				return e.runDrain(ctx, serial, w, e.sz.SerialN, 0, orderedDrainCheck(e.sz.SerialN, 1))
			})
		}
	}
	slowLabel := fmt.Sprintf("W2 drain %d, 5 ms handler, 1 worker", e.sz.SlowN)
	for _, sys := range consumers {
		k := keys("w2")
		if sys.name() == "outboxgen" {
			k = keys("w2", "ordered", "otel")
		}
		one(k, slowLabel, sys, func() (result, error) {
			return e.runDrain(ctx, sys, 1, e.sz.SlowN, slowHandler, nil)
		})
		if sys.name() == "outboxgen" {
			one(keys("otel"), slowLabel+", "+otelLabel, traced, func() (result, error) {
				chk, err := tracedDrainCheck(ctx, b.otel)
				if err != nil {
					return result{}, err
				}
				return e.runDrain(ctx, traced, 1, e.sz.SlowN, slowHandler, chk)
			})
			one(keys("ordered"), slowLabel+", "+orderedLabel(e.sz.OrderedKeys), ordered, func() (result, error) {
				return e.runDrain(ctx, ordered, 1, e.sz.SlowN, slowHandler, orderedDrainCheck(e.sz.SlowN, e.sz.OrderedKeys))
			})
		}
	}

	for _, lc := range latencyCases(consumers, e.sz) {
		if !b.wants(lc.key, lc.sys.name()) || ctx.Err() != nil || (lc.xproc && e.round > b.o.xprocRounds) {
			continue
		}
		t := time.Now()
		lr, err := e.runLatency(ctx, lc.sys, lc.delay, lc.xproc, lc.rate)
		took := time.Since(t)
		metrics := []struct {
			metric, unit string
			v            float64
		}{{"p50", "ms", lr.P50}, {"p95", "ms", lr.P95}, {"p99", "ms", lr.P99}, {"business tx p99", "ms", lr.TxP99},
			{"claims or polls per message", "claims/msg", perMsg(lr.Counts.Claims, lr.N)}}
		if lc.xproc {
			metrics = append(metrics, struct {
				metric, unit string
				v            float64
			}{"consumer statements per message", "stmt/msg", perMsg(lr.Counts.Stmts, lr.N)})
		}
		for _, m := range metrics {
			r := result{Mode: base.Mode, Round: base.Round, System: lc.sys.name(), Unit: m.unit,
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

	// Idle: once per run (the first driver mode's first round; the poll timing does not depend
	// on the driver mode), every consumer system at the same time, each in its own child
	// process and database, so the case costs IdleWait + IdleWindow once.
	if e.round == 1 && e.mode == b.o.modes[0] && ctx.Err() == nil {
		var idle []system
		for _, sys := range consumers {
			if b.wants("idle", sys.name()) {
				idle = append(idle, sys)
			}
		}
		type idleOut struct {
			r   idleResult
			err error
		}
		outs := make([]idleOut, len(idle))
		t := time.Now()
		var wg sync.WaitGroup
		for i, sys := range idle {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := e.runIdle(ctx, sys)
				outs[i] = idleOut{r, err}
			}()
		}
		wg.Wait()
		took := time.Since(t)
		for i, sys := range idle {
			o := outs[i]
			label := fmt.Sprintf("Idle after %s without traffic", e.sz.IdleWait)
			b.record(result{Mode: base.Mode, Round: base.Round, System: sys.name(), Unit: "claims/s",
				Workload: label + ", claims or polls per second", Value: o.r.ClaimsPerSec, Loss: o.r.Loss, Dup: o.r.Dup}, o.err, took)
			b.record(result{Mode: base.Mode, Round: base.Round, System: sys.name(), Unit: "stmt/s",
				Workload: label + ", consumer statements per second", Value: o.r.StmtsPerSec, Note: o.r.Note}, o.err, took)
		}
	}

	// Backfill: L0's multi-row INSERTs and EnqueueMany share a row; one Enqueue per message
	// has its own.
	for _, c := range []struct {
		sys system
		way backfillWay
	}{{limitSystem{}, backfillL0}, {oursSystem{}, backfillMany}, {oursSystem{}, backfillSingles}} {
		one(keys("backfill"), backfillLabel(e.sz.BackfillN, c.way), c.sys, func() (result, error) {
			return e.runBackfill(ctx, e.sz.BackfillN, c.way)
		})
	}

	b.runRetentionWorkloads(ctx, e)

	for _, sys := range consumers {
		for _, n := range []int{e.sz.MemSmall, e.sz.MemLarge} {
			one(keys("mem"), fmt.Sprintf("Memory peak RSS, backlog %d", n), sys, func() (result, error) { return e.runMemory(ctx, sys, n) })
		}
	}
}
