package main

import (
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// payloadSize is the size of every message body: the issue fixes 200-byte JSON payloads.
const payloadSize = 200

// makePayload returns a 200-byte JSON object carrying the sequence number and the send time
// (Unix nanoseconds), padded to size so both systems move the same bytes.
func makePayload(seq int64, sent time.Time) []byte {
	head := fmt.Sprintf(`{"seq":%d,"ts":%d,"pad":"`, seq, sent.UnixNano())
	pad := payloadSize - len(head) - 2
	if pad < 0 {
		pad = 0
	}
	b := make([]byte, 0, payloadSize)
	b = append(b, head...)
	for i := 0; i < pad; i++ {
		b = append(b, 'x')
	}
	return append(b, '"', '}')
}

// payloadSeq reads the sequence number without a full JSON decode: the no-op handler should
// cost as little as possible, so the numbers measure the outbox, not encoding/json.
func payloadSeq(p []byte) (int64, error) {
	const prefix = `{"seq":`
	if len(p) < len(prefix) || string(p[:len(prefix)]) != prefix {
		return 0, fmt.Errorf("payload does not start with %s: %.40q", prefix, p)
	}
	end := len(prefix)
	for end < len(p) && p[end] >= '0' && p[end] <= '9' {
		end++
	}
	return strconv.ParseInt(string(p[len(prefix):end]), 10, 64)
}

// tracker counts deliveries per sequence number, so every run reports losses and duplicates,
// and records when each sequence number was first handled (for latency).
type tracker struct {
	n        int64
	seen     []atomic.Int32
	firstAt  []atomic.Int64 // Unix nanoseconds of the first delivery
	distinct atomic.Int64
	total    atomic.Int64
	bad      atomic.Int64 // payloads that did not parse or were out of range
	done     chan struct{}
	doneOnce sync.Once
}

func newTracker(n int) *tracker {
	return &tracker{
		n:       int64(n),
		seen:    make([]atomic.Int32, n),
		firstAt: make([]atomic.Int64, n),
		done:    make(chan struct{}),
	}
}

// deliver records one handler call for seq at time at (Unix nanoseconds).
func (t *tracker) deliver(seq int64, at int64) {
	t.total.Add(1)
	if seq < 0 || seq >= t.n {
		t.bad.Add(1)
		return
	}
	if t.seen[seq].Add(1) == 1 {
		t.firstAt[seq].Store(at)
		if t.distinct.Add(1) == t.n {
			t.doneOnce.Do(func() { close(t.done) })
		}
	}
}

// deliverPayload parses p and records it.
func (t *tracker) deliverPayload(p []byte) {
	now := time.Now().UnixNano()
	seq, err := payloadSeq(p)
	if err != nil {
		t.bad.Add(1)
		return
	}
	t.deliver(seq, now)
}

// wait blocks until every sequence number was seen or the timeout passes.
func (t *tracker) wait(timeout time.Duration) bool {
	if t.n == 0 {
		return true
	}
	select {
	case <-t.done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// losses is the number of sequence numbers never delivered; dups the deliveries beyond the first.
func (t *tracker) losses() int64 { return t.n - t.distinct.Load() }
func (t *tracker) dups() int64   { return t.total.Load() - t.distinct.Load() - t.bad.Load() }

// lastAt is the time of the latest first delivery (Unix nanoseconds).
func (t *tracker) lastAt() int64 {
	var m int64
	for i := range t.firstAt {
		m = max(m, t.firstAt[i].Load())
	}
	return m
}

// missing lists up to limit sequence numbers never delivered.
func (t *tracker) missing(limit int) []int64 {
	var out []int64
	for i := range t.seen {
		if t.seen[i].Load() == 0 && len(out) < limit {
			out = append(out, int64(i))
		}
	}
	return out
}
