//go:build reliability

package reliability

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/reliability/internal/ledger"
)

// Rate limit: 3 worker processes share rate_limit "50/s" over a backlog of 3,000 messages.
// The delivered rate, per second of the run, averages within 10% of 50 and no second holds
// more than 60. The second run adds concurrency 2 and handlers of 50ms, and no worker ever
// has more than 2 handlers running at once.
func TestRateLimit(t *testing.T) {
	total := 3000
	for _, c := range []struct {
		name        string
		ms          int
		concurrency int
	}{
		{"rate", 0, 0},
		{"rate_concurrency2", 50, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, "ratelimit_"+c.name)
			for i := 0; i < total; i += 100 {
				batch := make([]spec, 100)
				for j := range batch {
					batch[j] = okMsg(c.ms)
				}
				if err := e.enqueueTx(context.Background(), batch, false); err != nil {
					t.Fatalf("enqueue: %v", err)
				}
			}
			flags := baseFlags("-concurrency", "16", "-batch", "100", "-rate-limit", "50/s")
			if c.concurrency > 0 {
				flags = append(flags, "-type-concurrency", fmt.Sprint(c.concurrency))
			}
			w1 := e.startWorker("w1", workerOpts{flags: flags})
			w2 := e.startWorker("w2", workerOpts{flags: flags})
			w3 := e.startWorker("w3", workerOpts{flags: flags})
			e.settle(3 * time.Minute)
			e.requireAlive(w1, w2, w3)
			res, lines, _ := e.check(false, "")
			if res.Sent != total {
				t.Errorf("SENT %d of %d", res.Sent, total)
			}
			r := measureRate(lines)
			summary := fmt.Sprintf("rate limit 50/s, 3 workers, %d messages%s: %d calls over %.1fs, %.2f/s on average, seconds from %d to %d, busiest worker at most %d handlers at once",
				total, map[bool]string{true: fmt.Sprintf(", concurrency %d, %dms handlers", c.concurrency, c.ms), false: ""}[c.concurrency > 0],
				r.calls, r.span.Seconds(), r.mean, r.minSec, r.maxSec, r.peak)
			t.Log(summary)
			report(summary)
			if r.mean < 45 || r.mean > 55 {
				t.Errorf("average rate %.2f/s, want within 10%% of 50", r.mean)
			}
			if r.maxSec > 60 {
				t.Errorf("a second held %d calls, want at most 60", r.maxSec)
			}
			if c.concurrency > 0 && r.peak > c.concurrency {
				t.Errorf("a worker ran %d handlers at once, want at most %d", r.peak, c.concurrency)
			}
		})
	}
}

type rateResult struct {
	calls          int
	span           time.Duration
	mean           float64
	minSec, maxSec int
	peak           int // most handlers running at once in one process
}

// measureRate counts handler calls per whole second from the first call. The last second,
// cut short by the end of the backlog, is left out of the minimum. The peak is the most calls
// begun and not yet done in one process at any moment.
func measureRate(lines []ledger.Line) rateResult {
	var calls []int64
	byProc := map[string][]ledger.Line{}
	for _, l := range lines {
		if l.T == ledger.KindCall || l.T == ledger.KindDone {
			byProc[l.Proc] = append(byProc[l.Proc], l)
		}
		if l.T == ledger.KindCall {
			calls = append(calls, l.At)
		}
	}
	var r rateResult
	r.calls = len(calls)
	if len(calls) == 0 {
		return r
	}
	sort.Slice(calls, func(i, j int) bool { return calls[i] < calls[j] })
	first, last := calls[0], calls[len(calls)-1]
	r.span = time.Duration(last - first)
	per := make([]int, int(r.span/time.Second)+1)
	for _, at := range calls {
		per[(at-first)/int64(time.Second)]++
	}
	r.minSec = per[0]
	for i, n := range per {
		r.maxSec = max(r.maxSec, n)
		if i < len(per)-1 {
			r.minSec = min(r.minSec, n)
		}
	}
	// The mean over whole seconds: the calls before the last second, over their seconds.
	if len(per) > 1 {
		r.mean = float64(len(calls)-per[len(per)-1]) / float64(len(per)-1)
	} else {
		r.mean = float64(len(calls))
	}
	for _, ls := range byProc {
		sort.SliceStable(ls, func(i, j int) bool { return ls[i].At < ls[j].At })
		running := 0
		for _, l := range ls {
			if l.T == ledger.KindCall {
				running++
				r.peak = max(r.peak, running)
			} else {
				running--
			}
		}
	}
	return r
}
