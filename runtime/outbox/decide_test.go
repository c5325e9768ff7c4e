package outbox

import (
	"testing"
	"time"
)

// The worker's decisions, checked without a database.

func TestNextIdle(t *testing.T) {
	const minPoll, poll = 20 * time.Millisecond, 300 * time.Millisecond
	for _, tc := range []struct {
		name   string
		idle   time.Duration
		got    int
		failed bool
		want   time.Duration
	}{
		{"rows found: back to the minimum", 160 * time.Millisecond, 3, false, minPoll},
		{"nothing found: double", 20 * time.Millisecond, 0, false, 40 * time.Millisecond},
		{"nothing found: capped at PollInterval", 200 * time.Millisecond, 0, false, poll},
		{"at PollInterval: stays", poll, 0, false, poll},
		{"failed: unchanged", 40 * time.Millisecond, 0, true, 40 * time.Millisecond},
	} {
		if got := nextIdle(tc.idle, tc.got, tc.failed, minPoll, poll); got != tc.want {
			t.Errorf("%s: nextIdle(%s, %d, %v) = %s, want %s", tc.name, tc.idle, tc.got, tc.failed, got, tc.want)
		}
	}
}

func TestNextIdleRampsFromMinToPollInterval(t *testing.T) {
	idle, steps := 5*time.Millisecond, 0
	for idle < 300*time.Millisecond && steps < 100 {
		idle = nextIdle(idle, 0, false, 5*time.Millisecond, 300*time.Millisecond)
		steps++
	}
	if idle != 300*time.Millisecond || steps != 6 {
		t.Fatalf("ramp ended at %s after %d empty claims, want 300ms after 6 (5, 10, 20, 40, 80, 160, 300)", idle, steps)
	}
}

func TestClaimFollowUp(t *testing.T) {
	for _, tc := range []struct {
		name                    string
		n, got                  int
		more, seeking, failed   bool
		wantBacklog, wantRescan bool
	}{
		{"full claim: backlog", 16, 16, false, false, false, true, false},
		{"full seeking claim: keep seeking", 16, 16, false, true, false, true, false},
		{"short claim with rows left past the windows: backlog", 16, 5, true, false, false, true, false},
		{"short claim, nothing left: wait", 16, 5, false, false, false, false, false},
		{"empty claim: wait", 16, 0, false, false, false, false, false},
		{"empty claim that saw held rows: wait", 16, 0, true, false, false, false, false},
		{"short seeking claim: rescan from the front", 16, 5, false, true, false, true, true},
		{"empty seeking claim: rescan from the front", 16, 0, false, true, false, true, true},
		{"failed claim: neither", 16, 0, true, true, true, false, false},
	} {
		backlog, rescan := claimFollowUp(tc.n, tc.got, tc.more, tc.seeking, tc.failed)
		if backlog != tc.wantBacklog || rescan != tc.wantRescan {
			t.Errorf("%s: backlog %v rescan %v, want %v %v", tc.name, backlog, rescan, tc.wantBacklog, tc.wantRescan)
		}
	}
}

func TestSeekNext(t *testing.T) {
	for _, tc := range []struct {
		name                      string
		backlog, rescan, haveSeek bool
		sinceScan                 time.Duration
		want                      bool
	}{
		{"draining a backlog: seek", true, false, true, time.Millisecond, true},
		{"no backlog: scan", false, false, true, time.Millisecond, false},
		{"rescan due: scan", true, true, true, time.Millisecond, false},
		{"no position yet: scan", true, false, false, time.Millisecond, false},
		{"rescanEvery passed: scan", true, false, true, rescanEvery, false},
	} {
		if got := seekNext(tc.backlog, tc.rescan, tc.haveSeek, tc.sinceScan); got != tc.want {
			t.Errorf("%s: seekNext = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestReserveSlots(t *testing.T) {
	base := slotState{batchSize: 16, concurrency: 16, sinkRoom: 1000}
	with := func(f func(*slotState)) slotState { s := base; f(&s); return s }
	for _, tc := range []struct {
		name              string
		s                 slotState
		backlog, gathered bool
		wantN             int
		wantTake, wantGat bool
	}{
		{"idle: one free slot is enough", with(func(s *slotState) { s.free = 1 }), false, false, 1, true, false},
		{"idle: all free, take a batch", with(func(s *slotState) { s.free = 16 }), false, false, 16, true, false},
		{"no free slot: wait", with(func(s *slotState) { s.free = 0 }), false, false, 0, false, false},
		{"backlog: under half free, wait without gathering", with(func(s *slotState) { s.free = 7 }), true, false, 7, false, false},
		{"backlog: half free, gather the rest", with(func(s *slotState) { s.free = 8 }), true, false, 8, false, true},
		{"backlog: half free and gathered, take", with(func(s *slotState) { s.free = 8 }), true, true, 8, true, false},
		{"backlog: all free, take at once", with(func(s *slotState) { s.free = 16 }), true, false, 16, true, false},
		{"at most BatchSize", with(func(s *slotState) { s.free = 16; s.batchSize = 4 }), false, false, 4, true, false},
		{"prefetch takes rows beyond the free slots", with(func(s *slotState) { s.free = 0; s.prefetch = 4 }), false, false, 4, true, false},
		{"prefetched rows waiting: free is negative", with(func(s *slotState) { s.free = -4; s.prefetch = 4 }), false, false, 0, false, false},
		{"a full result sink stops claims", with(func(s *slotState) { s.free = 16; s.sinkRoom = 0 }), false, false, 0, false, false},
		{"an overfull result sink counts as full", with(func(s *slotState) { s.free = 16; s.sinkRoom = -3 }), false, false, 0, false, false},
		{"sink room bounds the claim", with(func(s *slotState) { s.free = 16; s.sinkRoom = 2 }), false, false, 2, true, false},
	} {
		n, take, gather := reserveSlots(tc.s, tc.backlog, tc.gathered)
		if n != tc.wantN || take != tc.wantTake || gather != tc.wantGat {
			t.Errorf("%s: reserveSlots(%+v, backlog %v, gathered %v) = %d take %v gather %v; want %d %v %v",
				tc.name, tc.s, tc.backlog, tc.gathered, n, take, gather, tc.wantN, tc.wantTake, tc.wantGat)
		}
	}
}

func TestPrefetchRows(t *testing.T) {
	for _, tc := range []struct {
		name    string
		avgTook time.Duration
		want    int
	}{
		{"no handler finished yet", 0, 0},
		{"handlers slower than the horizon", 2 * prefetchHorizon, 8},
		{"handlers as long as the horizon: one row a slot", prefetchHorizon, 16},
		{"fast handlers: capped at BatchSize", time.Microsecond, 100},
	} {
		if got := prefetchRows(float64(tc.avgTook), 16, 100); got != tc.want {
			t.Errorf("%s: prefetchRows(%s, 16, 100) = %d, want %d", tc.name, tc.avgTook, got, tc.want)
		}
	}
}

func TestLingerFor(t *testing.T) {
	if got := lingerFor(false); got != flushLinger {
		t.Errorf("unordered batch lingers %s, want flushLinger %s", got, flushLinger)
	}
	if got := lingerFor(true); got != orderedFlushLinger || got >= flushLinger {
		t.Errorf("batch holding an ordered result lingers %s, want orderedFlushLinger %s (shorter than %s)", got, orderedFlushLinger, flushLinger)
	}
}

func TestWriteGivesUp(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	never := func() bool { return false }
	stopping := func() bool { return true }
	for _, tc := range []struct {
		name     string
		ctxDone  bool
		deadline time.Time
		try      int
		shutting func() bool
		want     bool
	}{
		{"deadline far: retry", false, now.Add(time.Minute), 1, never, false},
		{"context ended: give up", true, now.Add(time.Minute), 1, never, true},
		{"next pause passes the deadline: give up", false, now.Add(50 * time.Millisecond), 1, never, true},
		{"shutting down, few tries: retry", false, now.Add(time.Minute), 3, stopping, false},
		{"shutting down after four tries: give up", false, now.Add(time.Minute), 4, stopping, true},
		{"many tries, not shutting down: retry", false, now.Add(time.Minute), 9, never, false},
	} {
		if got := writeGivesUp(tc.ctxDone, now, tc.deadline, 100*time.Millisecond, tc.try, tc.shutting); got != tc.want {
			t.Errorf("%s: writeGivesUp = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestNextWritePause(t *testing.T) {
	p, seen := 50*time.Millisecond, []time.Duration{}
	for range 8 {
		p = nextWritePause(p)
		seen = append(seen, p)
	}
	if seen[0] != 100*time.Millisecond || seen[len(seen)-1] != 2*time.Second {
		t.Fatalf("pauses %v, want doubling from 100ms and capped at 2s", seen)
	}
}
