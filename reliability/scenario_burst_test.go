//go:build reliability

package reliability

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Scenario 6: a burst enqueued by 16 goroutines while 2 workers drain: none lost, memory
// bounded.
func TestBurst(t *testing.T) {
	e := newEnv(t, "burst")
	total := 20000
	if soak {
		total = 100000
	}
	flags := []string{"-stale", "30s", "-timeout", "10s", "-poll", "100ms", "-concurrency", "16", "-batch", "100", "-mem", "250ms"}
	w1 := e.startWorker("w1", workerOpts{flags: flags})
	w2 := e.startWorker("w2", workerOpts{flags: flags})
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Int64
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(total) {
				if err := e.enqueueTx(context.Background(), []spec{okMsg(0)}, false); err != nil {
					failed.Add(1)
					t.Errorf("enqueue: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	enqueued := time.Since(start)
	e.settle(5 * time.Minute)
	drained := time.Since(start)
	e.requireAlive(w1, w2)
	res, lines, _ := e.check(false, "")
	heap, rss := maxMem(lines)
	summary := fmt.Sprintf("burst: %d messages by 16 goroutines in %v (%.0f/s); all SENT after %v (%.0f/s); worker peak heap %.1f MiB, peak RSS %.1f MiB",
		total, enqueued.Round(time.Millisecond), float64(total)/enqueued.Seconds(), drained.Round(time.Millisecond),
		float64(total)/drained.Seconds(), float64(heap)/(1<<20), float64(rss)/(1<<20))
	t.Log(summary)
	report(summary)
	if res.Sent != total {
		t.Errorf("SENT %d of %d", res.Sent, total)
	}
	// Bounded: a worker holds at most BatchSize claimed rows and Concurrency handlers, so its
	// memory must not grow with the backlog. 200 MiB RSS is far above that and far below
	// what holding a 100,000-row backlog in memory would take with Go's overhead.
	if rss > 200<<20 {
		t.Errorf("worker peak RSS %.1f MiB: memory is not bounded by the batch size", float64(rss)/(1<<20))
	}
	if rss == 0 {
		t.Errorf("no memory sample in the ledger")
	}
}
