//go:build reliability

package reliability

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/reliability/internal/ledger"
)

// Scenario 9: InTx's handoff under kill -9. The 3 worker processes enqueue the messages
// themselves (relworker -produce-rate: outbox.InTx on the *sql.DB their worker runs on, so a
// message is inserted already claimed by that worker and dispatched from memory after the
// commit, with no claim transaction; see runtime/outbox/handoff.go), at 100 messages/s each,
// one transaction in 8 rolled back. Once the last new incarnation has handled killGap
// messages, one of them, picked at random, is killed with SIGKILL once its ledger shows a handler call in
// flight, and a new incarnation started, 20 times: a kill lands mid-call, between a commit and its dispatch, or between a commit and
// the ledger's outcome line (ambiguous: the table decides; relworker waits 10ms there, so that
// some kills do). Then the producers stop (SIGUSR1),
// the workers drain, and the usual checks run; on top, the handoff must really have carried
// the load: most committed messages SENT by their handoff claim (attempt 1, claimed_at =
// created_at: claimed by their own INSERT), and handed-off rows of killed processes brought
// back by the reclaim.
func TestHandoffKill(t *testing.T) {
	began := time.Now()
	e := newEnv(t, "handoff_kill")
	kills := 20
	if soak {
		kills = 200
	}
	const rate = 100 // messages per second and process
	// -produce-lag: 10ms between a transaction's end and its outcome lines, so that some kills
	// land after a commit and before its record (about 40ms per transaction and goroutine).
	flags := baseFlags("-concurrency", "8", "-batch", "8", "-produce-rate", fmt.Sprint(rate), "-produce-lag", "10ms")
	roles := []string{"w1", "w2", "w3"}
	live := map[string]*proc{}
	for _, r := range roles {
		live[r] = e.startWorker(r, workerOpts{flags: flags})
	}

	rnd := rand.New(rand.NewPCG(9, uint64(time.Now().UnixNano())))
	var killed []string
	e.waitHandled(killGap, "they started", live["w1"], live["w2"], live["w3"])
	for i := 0; i < kills; i++ {
		role := roles[rnd.IntN(len(roles))]
		// Mid-dispatch, as kill_worker does; here most calls in flight are handed off.
		killed = append(killed, e.killMidDispatch(live, role, workerOpts{flags: flags}, e.openCalls))
		e.waitHandled(killGap, "it started", live[role])
	}
	// Stop the producers, not the workers: once each has written its pstop line, no enqueue
	// is in flight. The start line comes after relworker set up its SIGUSR1 handler.
	for _, r := range roles {
		e.waitLine(live[r].name, ledger.KindStart, 10*time.Second)
		if err := live[r].cmd.Process.Signal(syscall.SIGUSR1); err != nil {
			t.Fatalf("SIGUSR1 %s: %v", live[r].name, err)
		}
	}
	for _, r := range roles {
		e.waitLine(live[r].name, ledger.KindProduced, 15*time.Second)
		e.requireAlive(live[r])
	}
	// Killed claims, handed off or not, come back after their lease (2s) through the reclaim.
	e.settle(settleTimeout)
	res, lines, rows := e.check(true, fmt.Sprintf("kill -9 x%d of 3 workers that enqueue through InTx", len(killed)))

	inflight := inflightByProc(lines)
	mid := 0
	for _, name := range killed {
		if inflight[name] > 0 {
			mid++
		}
	}
	e.mu.Lock()
	byKill := 0
	for _, d := range res.Dups {
		if e.killed[d.Proc] {
			byKill++
		}
	}
	e.mu.Unlock()
	// Cut: messages whose process was killed after their enq line and before their outcome's.
	produced, cut, _ := ledger.Produced(lines)
	exists := map[string]bool{}
	for _, r := range rows {
		exists[r.Key] = true
	}
	cutCommitted := 0
	if cut > 0 {
		concluded := map[string]bool{}
		for _, l := range lines {
			if l.T == ledger.KindEnqueued {
				concluded[l.Key] = true
			}
		}
		for _, q := range produced {
			if !concluded[q.Key] && exists[q.Key] {
				cutCommitted++
			}
		}
	}
	h := e.handoffCounts(rows)
	committed := res.Committed + res.AmbiguousCommitted
	summary := fmt.Sprintf("handoff_kill: kill -9 x%d (%d mid-dispatch) of 3 workers enqueueing through InTx at %d msg/s each; committed %d (+%d ambiguous), "+
		"SENT by the handoff %d (%.0f%%), inserted claimed %d, reclaimed %d (of them inserted claimed %d), cut by a kill before the outcome line %d (committed %d), "+
		"duplicates %d (process killed %d); took %v",
		len(killed), mid, rate, res.Committed, res.AmbiguousCommitted, h.sentByHandoff, 100*float64(h.sentByHandoff)/float64(max(committed, 1)),
		h.bornClaimed, h.reclaimed, h.reclaimedBornClaimed, cut, cutCommitted, res.Duplicates, byKill, time.Since(began).Round(100*time.Millisecond))
	t.Log(summary)
	report(summary)
	if h.sentByHandoff*10 < committed*6 {
		t.Errorf("only %d of %d committed messages were SENT by their handoff (attempt 1, claimed_at = created_at), want at least 60%%: the handoff did not carry the load",
			h.sentByHandoff, committed)
	}
	if h.sentByHandoff > h.bornClaimed {
		t.Errorf("%d rows SENT by a handoff, but only %d were inserted claimed (audit trail): the two measures disagree", h.sentByHandoff, h.bornClaimed)
	}
	if h.reclaimedBornClaimed == 0 {
		t.Errorf("no handed-off row went through a reclaim: the kills did not hit a handoff (reclaimed %d)", h.reclaimed)
	}
	if byKill != res.Duplicates {
		t.Errorf("%d of %d duplicates are not calls of a killed process: kills are the only fault here", res.Duplicates-byKill, res.Duplicates)
	}
	if mid < len(killed)/2 {
		t.Errorf("only %d of %d kills landed mid-dispatch: the scenario did not exercise killed in-flight calls", mid, len(killed))
	}
	if res.RolledBack == 0 {
		t.Errorf("no transaction was rolled back: the producers did not exercise a handoff's rollback (%s)", res)
	}
	if cutCommitted == 0 {
		t.Errorf("no kill landed between a commit and its outcome line (cut %d, none committed): the ambiguous record was not exercised", cut)
	}
}

// handoffs are scenario 9's measures of InTx's handoff.
type handoffs struct {
	// sentByHandoff: SENT rows at attempt 1 whose claimed_at is their created_at, one value
	// of the INSERT: claimed by the INSERT itself, and SENT under that claim.
	sentByHandoff int
	// bornClaimed: rows whose first audited change starts from PROCESSING (the audit trigger
	// sees UPDATEs only; any other row's first change is its claim, from PENDING).
	bornClaimed int
	// reclaimed: rows whose last_error is the reclaim's ("lease expired ..."); the scenario's
	// handlers do not fail, so no later error overwrote it. reclaimedBornClaimed: those of
	// them inserted claimed.
	reclaimed, reclaimedBornClaimed int
}

func (e *env) handoffCounts(rows []ledger.Row) handoffs {
	e.t.Helper()
	var h handoffs
	if err := e.db.QueryRow(`SELECT COUNT(*) FROM outbox_messages WHERE status = 'SENT' AND attempts = 1 AND claimed_at = created_at`).Scan(&h.sentByHandoff); err != nil {
		e.t.Fatal(err)
	}
	first := map[int64]ledger.Transition{}
	for _, tr := range e.history() { // in seq order
		if _, seen := first[tr.ID]; !seen {
			first[tr.ID] = tr
		}
	}
	for _, tr := range first {
		if tr.OldStatus == "PROCESSING" {
			h.bornClaimed++
		}
	}
	for _, r := range rows {
		if strings.HasPrefix(r.LastError, "lease expired") {
			h.reclaimed++
			if first[r.ID].OldStatus == "PROCESSING" {
				h.reclaimedBornClaimed++
			}
		}
	}
	return h
}
