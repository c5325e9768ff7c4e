// The retention workloads' part of the report: their targets, each a ratio of two rows measured
// in the same run, and the notes that say what an operator sees.

package main

import (
	"fmt"
	"strings"
)

// retentionReport writes the targets of retention-load, history and steady for mode, and the
// notes of their runs, when any of them ran.
func (b *bench) retentionReport(sb *strings.Builder, cells map[key]*cell, mode string) {
	get := func(workload string) *cell {
		c := cells[key{mode, workload, "outboxgen"}]
		if c == nil || c.n == 0 {
			return nil
		}
		return c
	}
	type line struct {
		name     string
		a, b     *cell
		compute  func(a, b float64) (string, bool)
		reported bool
	}
	sz := b.o.sz
	var ls []line
	// retention-load: the cleaner's cost against the same backlog kept (the target) and against
	// an empty table (reported: it adds what the backlog itself costs).
	type pair struct{ name, on, off, empty string }
	pairs := []pair{{"W2 drain, 1 worker", retLoadDrainLabel(sz, retCleaning), retLoadDrainLabel(sz, retKept), retLoadDrainLabel(sz, retEmpty)}}
	for _, conc := range []int{1, 8} {
		pairs = append(pairs, pair{fmt.Sprintf("W1, %d goroutine(s)", conc), retLoadTxLabel(sz, conc, retCleaning), retLoadTxLabel(sz, conc, retKept), retLoadTxLabel(sz, conc, retEmpty)})
	}
	for _, p := range pairs {
		ls = append(ls,
			line{fmt.Sprintf("Retention load, %s: cleaner deleting the %d-row backlog vs the same backlog with the cleaner off, overhead", p.name, sz.Ret.Backlog), get(p.on), get(p.off), overheadAtMost(0.10), false},
			line{fmt.Sprintf("Retention load, %s: cleaner deleting the backlog vs an empty table, overhead", p.name), get(p.on), get(p.empty), overheadAtMost(1), true})
		if del, rate := get(p.on+", rows the cleaner deleted"), get(p.on+", cleaner rate"); del != nil && rate != nil {
			ls = append(ls, line{fmt.Sprintf("Retention load, %s: rows the cleaner deleted during the measurement, and its rate", p.name), del, rate,
				func(a, r float64) (string, bool) { return fmt.Sprintf("%.0f rows at %.0f rows/s", a, r), true }, true})
		}
	}
	// history: a long SENT history against an empty table (the target), then what rows sent just
	// before and a held snapshot add (reported).
	h := func(c historyCase, suffix string) *cell { return get(historyLabel(sz, c) + suffix) }
	ls = append(ls,
		line{fmt.Sprintf("History, %d SENT rows vs empty table: drain rate, overhead", sz.Ret.HistoryRows), h(histKept, ""), h(histEmpty, ""), overheadAtMost(0.10), false},
		line{fmt.Sprintf("History, %d SENT rows vs empty table: claim p50", sz.Ret.HistoryRows), h(histKept, ", claim p50"), h(histEmpty, ", claim p50"), le(1.10), false},
		line{fmt.Sprintf("History, %d SENT rows vs empty table: claim p99", sz.Ret.HistoryRows), h(histKept, ", claim p99"), h(histEmpty, ", claim p99"), le(1.10), false},
		line{fmt.Sprintf("History, %d rows sent just before the drain (delete-marked claim entries), no snapshot, vs history alone: drain rate", sz.DrainN), h(histMarked, ""), h(histKept, ""), ratioOnly, true},
		line{"History, rows sent just before, REPEATABLE READ snapshot held vs no snapshot: drain rate", h(histSnapshot, ""), h(histMarked, ""), ratioOnly, true},
		line{"History, rows sent just before, REPEATABLE READ snapshot held vs no snapshot: claim p99", h(histSnapshot, ", claim p99"), h(histMarked, ", claim p99"), ratioOnly, true},
	)
	// steady: nothing grows from the first part of the run to the last.
	st := steadyLabel(sz.Ret)
	ls = append(ls,
		line{"Steady: max rows, second half vs first half (after the warm-up, Retention.Sent + the cleaner's interval)", get(st + ", max rows, second half after warm-up"), get(st + ", max rows, first half after warm-up"), le(1.10), false},
		line{"Steady: claim p99, last window vs first", get(st + ", claim p99, last window"), get(st + ", claim p99, first window"), le(1.10), false},
		line{"Steady: lag p99, last window vs first (bounded: flat, as the claims)", get(st + ", lag p99, last window"), get(st + ", lag p99, first window"), le(1.10), false},
		line{"Steady: lag p99 and max over the run", get(st + ", lag p99"), get(st + ", lag max"),
			func(p, m float64) (string, bool) { return fmt.Sprintf("%.1f ms, max %.1f ms", p, m), true }, true},
		line{"Steady: max rows and max data+index size", get(st + ", max rows"), get(st + ", max data+index size"),
			func(a, m float64) (string, bool) { return fmt.Sprintf("%.0f rows, %.1f MiB", a, m), true }, true},
	)
	var out []string
	for _, l := range ls {
		if l.a == nil || l.b == nil {
			continue
		}
		s, ok := l.compute(l.a.median, l.b.median)
		switch {
		case l.reported:
			out = append(out, fmt.Sprintf("- %s: %s (reported)", l.name, s))
		case ok:
			out = append(out, fmt.Sprintf("- %s: %s, met", l.name, s))
		default:
			out = append(out, fmt.Sprintf("- %s: %s, NOT met", l.name, s))
		}
	}
	var notes []string
	for _, r := range b.results {
		if r.Mode == mode && r.Note != "" && isRetentionRow(r.Workload) {
			// A note with a table in it (steady's samples) is followed by a blank line, so that
			// the next item does not join the table.
			n := fmt.Sprintf("- [r%d] %s: %s", r.Round, r.Workload, r.Note)
			if strings.Contains(r.Note, "\n") {
				n += "\n"
			}
			notes = append(notes, n)
		}
	}
	if len(out) > 0 {
		fmt.Fprintf(sb, "Retention targets (%s):\n\n%s\n\n%s\n\n", mode, strings.Join(out, "\n"), retentionHow)
	}
	if len(notes) > 0 {
		fmt.Fprintf(sb, "Retention notes (%s):\n\n%s\n\n", mode, strings.Join(notes, "\n"))
	}
}

// isRetentionRow: the row belongs to retention-load, history or steady.
func isRetentionRow(workload string) bool {
	for _, p := range []string{"Retention load:", "History:", "Steady "} {
		if strings.HasPrefix(workload, p) {
			return true
		}
	}
	return false
}

// retentionHow says how the retention rows were measured, under their targets.
const retentionHow = `How the retention rows were measured: each row of retention-load runs on a fresh database with one worker (its no-op handler drains the W2 backlog, or the messages W1's transactions hand it). ` +
	"Its baseline is the same backlog with the cleaner off (`Retention.Sent` KeepForever): the two differ only by the cleaner's work, so the ratio is the cleaner's cost. " +
	"The empty table is reported beside it: against it the backlog's own cost (a larger table, colder pages) is counted too, which history measures on its own. " +
	"The backlog's rows were sent two days before the run, past the default `Retention.Sent` (a day) the cleaning worker runs with; for W1 the measurement starts once the cleaner has deleted its first rows. " +
	"history's claim p50/p99 are the durations of the claim transactions that found rows (the worker's Observer); its snapshot case holds a REPEATABLE READ snapshot on another connection while rows are sent and while the drain runs, so InnoDB's purge keeps their delete-marked claim index entries. " +
	"What an operator sees of it: the transaction in information_schema.INNODB_TRX (`SELECT trx_mysql_thread_id, trx_started, trx_isolation_level FROM information_schema.INNODB_TRX ORDER BY trx_started LIMIT 1`), and `History list length` in SHOW ENGINE INNODB STATUS, which counts committed transactions' undo logs not yet purged (not rows), growing while it is open; what they do is end that transaction (`KILL` its thread, or fix the job that left it open). " +
	"steady's producer commits without outbox.InTx (as from another process), so every message goes through a claim; the size is information_schema.TABLES data_length + index_length after ANALYZE TABLE: pages allocated to the table, which deletes free for reuse but do not give back."
