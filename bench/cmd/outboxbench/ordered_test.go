package main

import (
	"strings"
	"testing"
	"time"
)

// The ordered drain's check must pass a correct run and catch each way the runtime could break
// its contract: a gap in a key's ordering_seq, a key handled out of commit order, a message
// stored under another key. A message never handled is a loss (the tracker's), not an order
// violation.
func TestCheckOrder(t *testing.T) {
	const keys = 2
	// seq 0, 2, 4 are key bench:0 and 1, 3 key bench:1 (round-robin); commit order per key:
	// bench:0: 2, 0, 4 (seq 2 committed first); bench:1: 1, 3.
	rows := func() []orderedRow {
		return []orderedRow{
			{"bench:0", 2, 0}, {"bench:0", 1, 2}, {"bench:0", 3, 4},
			{"bench:1", 1, 1}, {"bench:1", 2, 3},
		}
	}
	ordinals := func(m map[int64]int64) func(int64) int64 { return func(s int64) int64 { return m[s] } }
	good := map[int64]int64{2: 1, 1: 2, 0: 3, 3: 4, 4: 5}
	cases := []struct {
		name string
		rows []orderedRow
		ord  map[int64]int64
		want string // "" or a substring of the first problem
	}{
		{"commit order", rows(), good, ""},
		{"one never handled", rows(), map[int64]int64{2: 1, 1: 2, 3: 4, 4: 5}, ""},
		{"out of order", rows(), map[int64]int64{2: 3, 1: 2, 0: 1, 3: 4, 4: 5}, "key bench:0: ordering_seq 2 (seq 0) handled before ordering_seq 1 (seq 2)"},
		{"gap", func() []orderedRow { r := rows(); r[2].orderSeq = 4; return r }(), good, "key bench:0: ordering_seq 4 at position 3"},
		{"wrong key", func() []orderedRow { r := rows(); r[3].key = "bench:0"; return r }(), good, `message seq 1 has ordering key "bench:0", want "bench:1"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := checkOrder(c.rows, keys, ordinals(c.ord))
			switch {
			case c.want == "" && len(got) > 0:
				t.Fatalf("problems %q, want none", got)
			case c.want != "" && (len(got) == 0 || !strings.Contains(got[0], c.want)):
				t.Fatalf("problems %q, want one containing %q", got, c.want)
			}
		})
	}
}

// The handler-side half: two calls of one key at once are counted, calls of two keys are not,
// and each sequence number keeps the position of its first call.
func TestOrderCheckOverlap(t *testing.T) {
	c := newOrderCheck(4, 2)
	p := func(seq int64) []byte { return makePayload(seq, time.Now()) }
	c.start(p(0))
	c.start(p(1)) // another key: fine
	c.done(p(1))
	c.start(p(2)) // key of 0, which still runs
	c.done(p(2))
	c.done(p(0))
	c.start(p(0)) // a redelivery keeps its first position
	c.done(p(0))
	if o := c.overlaps.Load(); o != 1 {
		t.Fatalf("overlaps = %d, want 1", o)
	}
	if got := []int64{c.ordinal[0].Load(), c.ordinal[1].Load(), c.ordinal[2].Load(), c.ordinal[3].Load()}; got[0] != 1 || got[1] != 2 || got[2] != 3 || got[3] != 0 {
		t.Fatalf("ordinals = %v, want [1 2 3 0]", got)
	}
	c.start([]byte(`{"seq":9}`))
	if b := c.bad.Load(); b != 1 {
		t.Fatalf("bad = %d, want 1", b)
	}
}
