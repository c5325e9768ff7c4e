//go:build reliability

package reliability

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/outboxgen/outboxgen/reliability/internal/ledger"
)

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func (e *env) dumpLogs() {
	files, _ := filepath.Glob(filepath.Join(e.dir, "*.log"))
	for _, f := range files {
		e.t.Logf("--- %s (tail)\n%s", filepath.Base(f), tail(f, 15))
	}
}

// countLogLines counts lines of every worker log that contain s (e.g. error-level lines).
func (e *env) countLogLines(s string) int {
	files, _ := filepath.Glob(filepath.Join(e.dir, "*.log"))
	n := 0
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			e.t.Error(err)
			continue
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if strings.Contains(sc.Text(), s) {
				n++
			}
		}
		fh.Close()
	}
	return n
}

var refusedRE = regexp.MustCompile(`message_id=(\d+) claim_token=(\w+)`)

// fenceRefusals reads the workers' logs for result writes refused by the fence, keyed
// "id/token". It relies on the runtime's log text, so it is evidence, never a pass condition.
func (e *env) fenceRefusals() map[string]bool {
	out := map[string]bool{}
	files, _ := filepath.Glob(filepath.Join(e.dir, "*.log"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			e.t.Error(err)
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if !strings.Contains(line, "refused by the fence") {
				continue
			}
			if m := refusedRE.FindStringSubmatch(line); m != nil {
				out[m[1]+"/"+m[2]] = true
			}
		}
	}
	return out
}

// inflightAtKill counts, per killed incarnation, calls that had begun and not finished: the
// kill landed mid-dispatch.
func inflightByProc(lines []ledger.Line) map[string]int {
	open := map[string]map[string]bool{}
	for _, l := range lines {
		k := fmt.Sprintf("%d/%s", l.ID, l.Token)
		switch l.T {
		case ledger.KindCall:
			if open[l.Proc] == nil {
				open[l.Proc] = map[string]bool{}
			}
			open[l.Proc][k] = true
		case ledger.KindDone:
			delete(open[l.Proc], k)
		}
	}
	out := map[string]int{}
	for p, m := range open {
		out[p] = len(m)
	}
	return out
}

// openCalls counts the calls in proc's ledger that have begun and not finished.
func (e *env) openCalls(proc string) int {
	ls, _, err := ledger.ReadFile(filepath.Join(e.dir, proc+".jsonl"))
	if err != nil {
		return 0 // not written yet
	}
	return inflightByProc(ls)[proc]
}

// waitLine waits until proc's ledger holds a line of kind, or fails the test after timeout.
func (e *env) waitLine(proc, kind string, timeout time.Duration) {
	e.t.Helper()
	var off int64
	found := false
	defer func() {
		if !found {
			e.t.Logf("%s: no %q line in its ledger (log below)\n%s", proc, kind, tail(filepath.Join(e.dir, proc+".log"), 30))
		}
	}()
	e.waitFor(timeout, fmt.Sprintf("a %q line in %s's ledger", kind, proc), func() bool {
		lines, next, err := ledger.ReadFrom(e.ledgerPath(proc), off)
		if err != nil {
			e.t.Fatal(err)
		}
		off = next
		for _, l := range lines {
			found = found || l.T == kind
		}
		return found
	})
}

// maxMem returns the largest heap-in-use and RSS samples per role prefix.
func maxMem(lines []ledger.Line) (heap, rss uint64) {
	for _, l := range lines {
		if l.T != ledger.KindMem {
			continue
		}
		heap = max(heap, l.Heap)
		rss = max(rss, l.RSS)
	}
	return heap, rss
}

func countIncidents(lines []ledger.Line, kind string) int {
	n := 0
	for _, l := range lines {
		if l.T == ledger.KindIncident && l.Kind == kind {
			n++
		}
	}
	return n
}
