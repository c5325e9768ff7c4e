//go:build reliability

package reliability

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/reliability/internal/ledger"
	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// Scenario 10: worker processes of this outboxgen on tables marked for a newer one
// ("outboxgen schema N+1 min N+1", as a migration that old workers must not run beside would
// leave them). A worker started on them must not start: it exits with an error naming both
// versions and claims nothing. A worker running under load when the tables are re-marked must
// stop claiming (one schema_too_new incident) while it stays up, and claim again when the mark
// goes back; then every message is delivered exactly once.
func TestSchemaNewer(t *testing.T) {
	e := newEnv(t, "schema_newer")
	ctx := context.Background()
	next := outbox.SchemaVersion + 1
	newer := fmt.Sprintf("outboxgen schema %d min %d", next, next)
	current := fmt.Sprintf("outboxgen schema %d", outbox.SchemaVersion)
	// The refusal the worker must give, with both versions in it.
	want := fmt.Sprintf("are at schema version %d, newer than this outboxgen's %d: only outboxgen schema version %d or later may run on them",
		next, outbox.SchemaVersion, next)
	mark := func(comment string) {
		t.Helper()
		schemas, err := outbox.TableSchemas(ctx, e.db)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range schemas {
			if _, err := e.db.ExecContext(ctx, fmt.Sprintf("ALTER TABLE %s COMMENT = '%s'", s.Table, comment)); err != nil {
				t.Fatalf("mark %s: %v", s.Table, err)
			}
		}
	}
	enqueue := func(n int) {
		t.Helper()
		for i := 0; i < n; i++ {
			if err := e.enqueueTx(ctx, []spec{okMsg(5)}, false); err != nil {
				t.Fatal(err)
			}
		}
	}
	// pendingUnclaimed lists the rows no worker ever claimed: PENDING with no attempt.
	pendingUnclaimed := func() map[int64]bool {
		t.Helper()
		out := map[int64]bool{}
		for _, r := range e.rows() {
			if r.Status == "PENDING" && r.Attempts == 0 {
				out[r.ID] = true
			}
		}
		return out
	}

	// 1. A worker process cannot start on the newer tables.
	enqueue(5)
	mark(newer)
	w1 := e.startWorker("w1", workerOpts{flags: baseFlags()})
	select {
	case <-w1.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("w1 still runs 30s after it started on tables marked %q (log below)\n%s", newer, tail(filepath.Join(e.dir, w1.name+".log"), 20))
	}
	var exit *exec.ExitError
	if !errors.As(w1.err, &exit) || exit.ExitCode() != 1 {
		t.Errorf("w1 on newer tables ended with %v, want exit status 1", w1.err)
	}
	var exitErr string
	w1Lines, _, err := ledger.ReadFile(filepath.Join(e.dir, w1.name+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range w1Lines {
		switch l.T {
		case ledger.KindExit:
			exitErr = l.Err
		case ledger.KindCall:
			t.Errorf("w1 called its handler on newer tables: %+v", l)
		}
	}
	if !strings.Contains(exitErr, want) || !strings.Contains(exitErr, "NewWorker") {
		t.Errorf("w1's exit error %q, want NewWorker's refusal containing %q", exitErr, want)
	}
	if n := len(pendingUnclaimed()); n != 5 {
		t.Errorf("%d of the 5 messages enqueued before w1 are still unclaimed, want 5", n)
	}

	// 2. A running worker stops claiming when the tables are re-marked under load.
	mark(current)
	w2 := e.startWorker("w2", workerOpts{flags: baseFlags("-mem", "100ms")})
	loadCtx, stopLoad := context.WithCancel(ctx)
	wg := e.load(loadCtx, 2, 20*time.Millisecond, 0, func(r *rand.Rand) spec { return okMsg(5 + r.IntN(30)) })
	e.waitLine(w2.name, ledger.KindCall, 20*time.Second)
	remarked := time.Now()
	mark(newer)
	e.waitLine(w2.name, ledger.KindIncident, 20*time.Second)
	noticed := time.Since(remarked)
	stopLoad()
	wg.Wait()
	var incident ledger.Line
	w2Lines, _, err := ledger.ReadFile(filepath.Join(e.dir, w2.name+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range w2Lines {
		if l.T == ledger.KindIncident {
			incident = l
			break
		}
	}
	if incident.Kind != "schema_too_new" || !strings.Contains(incident.Err, want) || !strings.Contains(incident.Err, "stops claiming") {
		t.Errorf("w2's first incident %+v, want schema_too_new saying it stops claiming and %q", incident, want)
	}
	// Messages enqueued now, and those the load left, must stay unclaimed while w2 stays up:
	// watched over 20 of its memory samples (2s: 4 maintenance passes, 20 polls).
	enqueue(5)
	held := pendingUnclaimed()
	off, samples := e.ledgerEnd(w2.name), 0
	e.waitFor(30*time.Second, "20 memory samples in w2's ledger", func() bool {
		e.requireAlive(w2)
		ls, next, err := ledger.ReadFrom(e.ledgerPath(w2.name), off)
		if err != nil {
			t.Fatal(err)
		}
		off = next
		for _, l := range ls {
			if l.T == ledger.KindMem {
				samples++
			}
		}
		return samples >= 20
	})
	e.requireAlive(w2)
	still := pendingUnclaimed()
	var taken []int64
	for id := range held {
		if !still[id] {
			taken = append(taken, id)
		}
	}
	if len(taken) > 0 {
		t.Errorf("w2 claimed %d of the %d unclaimed messages after its schema incident: %v", len(taken), len(held), taken)
	}
	if n := countIncidents(e.lines(), "schema_too_new"); n != 1 {
		t.Errorf("%d schema_too_new incidents, want 1 (reported once while it lasts)", n)
	}

	// 3. The mark goes back: w2 claims again and everything is delivered exactly once.
	mark(current)
	e.settle(60 * time.Second)
	e.requireAlive(w2)
	res, _, _ := e.check(false, fmt.Sprintf("tables re-marked %q under load", newer))
	summary := fmt.Sprintf("schema_newer: w1 refused at start (%q); w2 saw the re-mark after %v and left %d unclaimed messages alone for 20 memory samples; %d SENT after the mark went back",
		exitErr, noticed.Round(time.Millisecond), len(held), res.Sent)
	t.Log(summary)
	report(summary)
}
