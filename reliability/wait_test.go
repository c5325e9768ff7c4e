//go:build reliability

package reliability

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/outboxgen/outboxgen/internal/testutil"
	"github.com/outboxgen/outboxgen/reliability/internal/ledger"
)

// workingTimeout bounds a wait for worker processes to handle messages again after a fault.
// A worker that does not within it is broken, not slow.
const workingTimeout = 30 * time.Second

// waitFor checks cond every 20ms until it holds, and fails the test after timeout.
// The conditions of the suite read ledger files or query the database, so they are checked
// less often than testutil.Eventually checks on its own.
func (e *env) waitFor(timeout time.Duration, what string, cond func() bool) {
	e.t.Helper()
	testutil.Eventually(e.t, timeout, what, throttled(20*time.Millisecond, cond))
}

// throttled returns cond checked at most once per every; between checks it reports false.
func throttled(every time.Duration, cond func() bool) func() bool {
	var last time.Time
	return func() bool {
		if time.Since(last) < every {
			return false
		}
		last = time.Now()
		return cond()
	}
}

// poll checks cond every 5ms until it holds or timeout has passed, and says whether it held.
// It is for a wait whose timeout is no failure: the scenario goes on either way and counts
// what happened.
func poll(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		<-tick.C
	}
	return true
}

// working returns a condition that holds once each of ps has handled n messages after
// working was called: n handler calls begun after the call and seen to return. A process
// that exits meanwhile fails the test.
func (e *env) working(n int, ps ...*proc) func() bool {
	e.t.Helper()
	type follow struct {
		p       *proc
		off     int64
		open    map[string]bool // calls begun after the mark and not yet returned
		handled int
	}
	fs := make([]*follow, len(ps))
	for i, p := range ps {
		fs[i] = &follow{p: p, off: e.ledgerEnd(p.name), open: map[string]bool{}}
	}
	return func() bool {
		all := true
		for _, f := range fs {
			if f.handled >= n {
				continue
			}
			e.requireAlive(f.p)
			lines, next, err := ledger.ReadFrom(e.ledgerPath(f.p.name), f.off)
			if err != nil {
				e.t.Fatal(err)
			}
			f.off = next
			for _, l := range lines {
				k := fmt.Sprintf("%d/%s", l.ID, l.Token)
				switch l.T {
				case ledger.KindCall:
					f.open[k] = true
				case ledger.KindDone:
					if f.open[k] {
						delete(f.open, k)
						f.handled++
					}
				}
			}
			all = all && f.handled >= n
		}
		return all
	}
}

// waitHandled waits until each of ps has handled n messages after the call: the pace of a
// scenario whose faults come once the workers carry the load again.
func (e *env) waitHandled(n int, after string, ps ...*proc) {
	e.t.Helper()
	e.waitFor(workingTimeout, fmt.Sprintf("%s to handle %d messages after %s", procNames(ps), n, after), e.working(n, ps...))
}

// waitLoad is waitHandled that also waits for the enqueuers to commit a message after the
// call: after an outage of the server, both sides of the load run again.
func (e *env) waitLoad(n int, after string, ps ...*proc) {
	e.t.Helper()
	working, committed := e.working(n, ps...), e.committedCount()
	e.waitFor(workingTimeout, fmt.Sprintf("%s to handle %d messages and the enqueuers to commit one after %s", procNames(ps), n, after), func() bool {
		return working() && e.committedCount() > committed
	})
}

func procNames(ps []*proc) string {
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.name
	}
	return strings.Join(names, ", ")
}

func (e *env) ledgerPath(proc string) string { return filepath.Join(e.dir, proc+".jsonl") }

// ledgerEnd is the offset after the last complete line of proc's ledger (0 before it exists).
func (e *env) ledgerEnd(proc string) int64 {
	e.t.Helper()
	b, err := os.ReadFile(e.ledgerPath(proc))
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return int64(bytes.LastIndexByte(b, '\n') + 1)
}
