// The worker's decisions as pure functions. They say how long to wait for the next claim,
// whether the next claim continues a backlog, how many slots a claim reserves, how long
// results linger and when a failing result write gives up. The loops in worker.go and
// results.go call them with their state. decide_test.go checks them without a database.

package outbox

import "time"

// nextIdle is the claim loop's wait after a claim that found got rows. It is MinPollInterval
// while rows arrive, and doubles up to PollInterval while claims find nothing. A failed claim
// keeps the wait it had, and the outage backoff comes on top of it.
func nextIdle(idle time.Duration, got int, failed bool, minPoll, poll time.Duration) time.Duration {
	switch {
	case failed:
		return idle
	case got > 0:
		return minPoll
	default:
		return min(2*idle, poll)
	}
}

// claimFollowUp decides what follows a claim of got rows out of n reserved. A full claim means
// a backlog, and so does one that left due rows past its windows. The loop then claims again
// as soon as slots allow. A short claim that seeked may have passed rows due earlier. The loop
// then rescans from the front at once. A failed claim is neither.
func claimFollowUp(n, got int, more, seeking, failed bool) (backlog, rescan bool) {
	if failed {
		return false, false
	}
	full := got == n || (more && got > 0)
	rescan = seeking && !full
	return full || rescan, rescan
}

// seekNext says whether the next claim may start where the last one ended instead of at the
// front of the claim index. It may only while a backlog drains, when no rescan is due, and
// for rescanEvery after the last scan from the front.
func seekNext(backlog, rescan, haveSeek bool, sinceScan time.Duration) bool {
	return backlog && !rescan && haveSeek && sinceScan < rescanEvery
}

// slotState is what reserve reads under w.mu.
type slotState struct {
	free        int // free dispatch slots, negative while prefetched rows wait
	prefetch    int // rows a claim may take beyond the free slots
	batchSize   int
	concurrency int
	sinkRoom    int // results the sink can still take before claims stop
}

// reserveSlots decides how many rows the next claim takes. take says to claim n rows now.
// Otherwise gather says enough slots are free to start the slotGather timer, and the caller
// waits for more slots or that timer. Without a backlog one slot suffices. With one, half of a
// full claim suffices, and the rest once gathered is set.
func reserveSlots(s slotState, backlog, gathered bool) (n int, take, gather bool) {
	full := min(s.batchSize, s.concurrency+s.prefetch)
	want := 1
	if backlog {
		want = max(1, full/2)
	}
	n = min(s.free+s.prefetch, s.batchSize, max(0, s.sinkRoom))
	if n >= full || (n >= want && (!backlog || gathered)) {
		return n, true, false
	}
	return n, false, n >= want
}

// prefetchRows is how many rows beyond the free slots a claim may take. It is as many as the
// slots are expected to start within prefetchHorizon. avgTook, the running average of handler
// durations in nanoseconds, gives the expectation. It is 0 until a handler has finished, and
// at most batchSize.
func prefetchRows(avgTook float64, concurrency, batchSize int) int {
	if avgTook <= 0 {
		return 0
	}
	n := float64(concurrency) * float64(prefetchHorizon) / avgTook
	return int(min(n, float64(batchSize)))
}

// lingerFor is how long the flusher waits for more results after the first of a batch. An
// ordered message's key waits for its write, since its successor is claimable only once it is
// recorded SENT. A batch holding one therefore lingers less.
func lingerFor(holdsOrdered bool) time.Duration {
	if holdsOrdered {
		return orderedFlushLinger
	}
	return flushLinger
}

// writeGivesUp says a failing result write stops retrying. It stops when its context ended,
// when the next pause would pass the deadline, or when Run is shutting down and a few tries
// have failed.
func writeGivesUp(ctxDone bool, now, deadline time.Time, pause time.Duration, try int, shuttingDown func() bool) bool {
	return ctxDone || now.Add(pause).After(deadline) || (try >= 4 && shuttingDown())
}

// nextWritePause doubles the pause between result write tries, up to 2s.
func nextWritePause(pause time.Duration) time.Duration { return min(pause*2, 2*time.Second) }
