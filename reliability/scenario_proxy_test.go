//go:build reliability

package reliability

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/reliability/internal/proxy"
)

// Scenario 4: a TCP proxy between one worker and the server pauses (longer than the lease)
// and drops connections; a second worker talks to the server directly and reclaims what the
// cut-off one held. Some handlers outlive their timeout on the first attempt.
func TestProxyFaults(t *testing.T) {
	e := newEnv(t, "proxy")
	cycles := 8
	if soak {
		cycles = 60
	}
	faults := runProxy(t, e, cycles, false)
	e.check(true, faults)
}

// TestSuiteCatchesUnfencedWrites is the suite's control: the stand-in worker with its result
// writes unfenced (WHERE id=? only) under the proxy's long pauses must make the checks fail.
// A suite that passed here would prove nothing about the fence.
func TestSuiteCatchesUnfencedWrites(t *testing.T) {
	bin, err := buildWorker("relworker-stub", "relstub")
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, "control_nofence")
	e.bin = bin
	e.procEnv = []string{"OUTBOX_REL_STUB_NOFENCE=1"}
	faults := runProxy(t, e, 4, true)
	res, _, _ := e.verify(true, "control: "+faults)
	if len(res.Problems) == 0 {
		t.Fatalf("the checks found nothing wrong with unfenced result writes: the suite cannot see a lost fence (%s)", res)
	}
	t.Logf("control: unfenced writes caught, %d problem(s), e.g.:\n%s", len(res.Problems), res.Summary(3))
	report(fmt.Sprintf("control_nofence: unfenced stand-in worker caught with %d problem(s); first: %s", len(res.Problems), res.Problems[0]))
}

func runProxy(t *testing.T, e *env, cycles int, longOnly bool) string {
	t.Helper()
	px, err := proxy.Start(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { px.Close() })
	flags := baseFlags("-concurrency", "8", "-batch", "8")
	w1 := e.startWorker("w1", workerOpts{addr: px.Addr(), flags: flags})
	w2 := e.startWorker("w2", workerOpts{flags: flags})
	ctx, stop := context.WithCancel(context.Background())
	gen := func(r *rand.Rand) spec {
		if r.IntN(10) == 0 {
			// Slower than the 500ms timeout on the first attempt only.
			return spec{Payload: map[string]any{"mode": "slowuntil", "ms": 800, "until": 2}, MaxAttempts: 100}
		}
		if longOnly {
			return okMsg(100 + r.IntN(300)) // long enough for a stale write to land mid-call
		}
		return mixedOK(r)
	}
	pause := 10 * time.Millisecond
	if longOnly {
		pause = 150 * time.Millisecond // the stand-in worker is slow; keep its backlog small
	}
	wg := e.load(ctx, 3, pause, 8, gen)

	rnd := rand.New(rand.NewPCG(5, uint64(time.Now().UnixNano())))
	var pauses, heldDrops, longPauses, drops int
	// Every kind of fault at least cycles/3 times, in random order.
	actions := make([]int, cycles)
	for i := range actions {
		actions[i] = i % 3
	}
	rnd.Shuffle(len(actions), func(i, j int) { actions[i], actions[j] = actions[j], actions[i] })
	// Each fault comes once w1 has handled killGap messages through the proxy since its
	// start, then since the previous fault.
	after := "it started"
	for i := 0; i < cycles; i++ {
		e.waitHandled(killGap, after, w1)
		action := actions[i]
		if longOnly {
			action = 0
		}
		switch action {
		case 0: // a pause longer than the lease: w2 reclaims w1's rows; w1's late writes must be fenced off
			px.Pause()
			time.Sleep(2500 * time.Millisecond) // the fault itself: it must outlast the 2s lease
			px.Resume()
			longPauses++
		case 1: // a short pause, then the connections are cut with a request of w1's in flight
			px.Pause()
			if poll(2*time.Second, func() bool { return px.Held() > 0 }) {
				heldDrops++
			}
			drops += px.Drop()
			px.Resume()
			pauses++
		default:
			drops += px.Drop()
		}
		after = fmt.Sprintf("fault %d", i+1)
	}
	e.waitHandled(killGap, after, w1)
	stop()
	wg.Wait()
	e.requireAlive(w1, w2)
	e.settle(settleTimeout)
	faults := fmt.Sprintf("long pauses (2.5s > 2s lease) %d, short pause+drop %d (%d with a request held), connections dropped %d", longPauses, pauses, heldDrops, drops)
	if longPauses == 0 || (!longOnly && drops == 0) {
		t.Errorf("faults not injected: %s", faults)
	}
	return faults
}
