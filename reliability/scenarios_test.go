//go:build reliability

package reliability

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/reliability/internal/ledger"
)

// settleTimeout bounds the drain after the faults stop. The soak's longer fault phases leave a
// large backlog, because enqueuers keep full speed while the faults slow the workers. A loaded
// machine drains it slowly, so the soak waits longer.
var settleTimeout = func() time.Duration {
	if soak {
		return 10 * time.Minute
	}
	return 90 * time.Second
}()

// The fault scenarios pace their faults by the load, not by the clock: a fault comes once each
// worker concerned has handled this many messages since the previous fault. After a kill that
// is the new incarnation, which then runs with a claim or two behind it. After an outage of
// the server it is every worker, so the next outage hits a load that runs again.
const (
	killGap   = 25
	outageGap = 100
)

// mixedOK is the steady load of the fault scenarios: messages that succeed after a short piece
// of work, so a fault often lands mid-dispatch.
func mixedOK(r *rand.Rand) spec { return okMsg(5 + r.IntN(60)) }

// Scenario 1: kill -9 a worker process mid-dispatch, repeatedly, while others run and new
// messages keep arriving; restart it each time.
func TestKillWorker(t *testing.T) {
	e := newEnv(t, "kill_worker")
	kills := 20
	if soak {
		kills = 200
	}
	flags := baseFlags("-concurrency", "8", "-batch", "8")
	roles := []string{"w1", "w2", "w3"}
	live := map[string]*proc{}
	for _, r := range roles {
		live[r] = e.startWorker(r, workerOpts{flags: flags})
	}
	ctx, stop := context.WithCancel(context.Background())
	wg := e.load(ctx, 4, 5*time.Millisecond, 8, mixedOK)

	rnd := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))
	var killed []string
	// A kill comes once the workers, the last new incarnation among them, carry the load.
	e.waitHandled(killGap, "they started", live["w1"], live["w2"], live["w3"])
	for i := 0; i < kills; i++ {
		role := roles[rnd.IntN(len(roles))]
		killed = append(killed, e.killMidDispatch(live, role, workerOpts{flags: flags}, e.openCalls))
		e.waitHandled(killGap, "it started", live[role])
	}
	stop()
	wg.Wait()
	for _, p := range live {
		e.requireAlive(p)
	}
	// Killed claims come back after their lease (2s) through the survivors' reclaim.
	e.settle(settleTimeout)
	res, lines, _ := e.check(true, "")
	inflight := inflightByProc(lines)
	mid := 0
	for _, name := range killed {
		if inflight[name] > 0 {
			mid++
		}
	}
	t.Logf("kills: %d, of which mid-dispatch (a handler call begun and not finished): %d", len(killed), mid)
	report(fmt.Sprintf("kill_worker: kill -9 x%d (%d mid-dispatch), 3 workers, 4 enqueuers", len(killed), mid))
	if mid < len(killed)/2 {
		t.Errorf("only %d of %d kills landed mid-dispatch: the scenario did not exercise killed in-flight calls", mid, len(killed))
	}
	if res.DupUnfinished == 0 {
		t.Errorf("no call cut off by a kill was redelivered: the scenario did not exercise redelivery (%s)", res)
	}
}

// Scenario 2: restart the database server under load (stop it, wait, start it), twice cleanly
// and once with kill -9. Workers and enqueuers report errors, keep running, reconnect and
// finish; transactions committed before the stop are not lost.
func TestRestartServer(t *testing.T) {
	e := newEnv(t, "restart_server")
	flags := baseFlags("-concurrency", "8", "-batch", "16")
	w1 := e.startWorker("w1", workerOpts{flags: flags})
	w2 := e.startWorker("w2", workerOpts{flags: flags})
	ctx, stop := context.WithCancel(context.Background())
	wg := e.load(ctx, 4, 5*time.Millisecond, 8, mixedOK)

	rounds := []string{"stop", "stop", "kill"}
	if soak {
		rounds = append(rounds, "stop", "kill", "stop", "kill")
	}
	var downs []string // per round: stop (or kill) until the server answered again
	// An outage comes once the load runs: both workers handled outageGap messages and the
	// enqueuers committed one since the start or the previous outage.
	e.waitLoad(outageGap, "they started", w1, w2)
	for i, how := range rounds {
		before := e.committedCount()
		downAt := time.Now()
		var err error
		if how == "kill" {
			err = srv.Kill()
		} else {
			err = srv.Stop()
		}
		if err != nil {
			t.Fatalf("round %d: %s server: %v", i, how, err)
		}
		time.Sleep(2 * time.Second) // the outage itself
		sctx, cancel := context.WithTimeout(context.Background(), srv.Kind.StartTimeout())
		err = srv.Start(sctx)
		cancel()
		if err != nil {
			t.Fatalf("round %d: start server: %v", i, err)
		}
		down := time.Since(downAt).Round(100 * time.Millisecond)
		downs = append(downs, down.String())
		t.Logf("round %d (%s): %d committed before the stop; down %v", i, how, before, down)
		e.requireAlive(w1, w2)
		e.waitLoad(outageGap, fmt.Sprintf("outage %d", i+1), w1, w2)
	}
	stop()
	wg.Wait()
	e.requireAlive(w1, w2)
	e.settle(settleTimeout)
	// The workers saw the outage: their logs carry the errors they reported and survived.
	workerErrs := e.countLogLines("level=ERROR") + e.countLogLines("level=WARN")
	res, _, _ := e.check(true, "")
	report(fmt.Sprintf("restart_server: rounds %v (2s pause each; down from stop to answering %v), worker error/warn log lines %d, enqueue errors %d", rounds, downs, workerErrs, e.enqErrors.Load()))
	if e.enqErrors.Load() == 0 {
		t.Errorf("no enqueue failed while the server was down: the outage did not hit the load")
	}
	if workerErrs == 0 {
		t.Errorf("the workers logged no error during %d outages: errors are being swallowed", len(rounds))
	}
	_ = res
}

// committedCount is how many messages the enqueuers saw commit so far.
func (e *env) committedCount() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, q := range e.enq {
		if q.State == ledger.Committed {
			n++
		}
	}
	return n
}
