package ledger

import (
	"strings"
	"testing"
	"time"
)

// Each case is a record of one key's calls that must (or must not) raise the named problem.
func TestCheckOrder(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ms := func(n int) int64 { return t0.Add(time.Duration(n) * time.Millisecond).UnixNano() }
	const key = "o:k1"
	enq := []Enqueued{
		{Key: "seq:1", State: Committed, OrderingKey: key, Index: 1},
		{Key: "seq:2", State: Committed, OrderingKey: key, Index: 2},
		{Key: "seq:3", State: Committed, OrderingKey: key, Index: 3},
		{Key: "seq:4", State: RolledBack, OrderingKey: key, Index: 3}, // its place was given back
		{Key: "seq:5", State: Committed},                              // unordered
	}
	rows := []Row{
		{ID: 10, Key: "seq:1", Status: "SENT", OrderingKey: key, OrderingSeq: 1},
		{ID: 11, Key: "seq:2", Status: "SENT", OrderingKey: key, OrderingSeq: 2},
		{ID: 12, Key: "seq:3", Status: "SENT", OrderingKey: key, OrderingSeq: 3},
		{ID: 13, Key: "seq:5", Status: "SENT"},
	}
	c := func(id int64, k, tok, proc string, at int) Line {
		return Line{T: KindCall, ID: id, Key: k, Token: tok, Attempt: 1, Proc: proc, Ord: key, At: ms(at)}
	}
	d := func(id int64, tok, proc string, ok bool, at int) Line {
		return Line{T: KindDone, ID: id, Token: tok, OK: ok, Proc: proc, At: ms(at)}
	}
	sent := func(id int64, tok string, at int) Transition {
		return Transition{ID: id, OldStatus: "PROCESSING", NewStatus: "SENT", OldToken: tok, NewToken: tok, At: time.Unix(0, ms(at)).UTC()}
	}
	// Position 1 fails once, then succeeds under claim b; position 2's first call (c, by w2) is
	// cut off by a kill and redelivered under d once the lease ran out; then position 3.
	clean := []Line{
		c(10, "seq:1", "a", "w1", 0), d(10, "a", "w1", false, 5),
		c(10, "seq:1", "b", "w1", 60), d(10, "b", "w1", true, 70),
		c(11, "seq:2", "c", "w2", 80),
		c(11, "seq:2", "d", "w1", 2100), d(11, "d", "w1", true, 2110),
		c(12, "seq:3", "e", "w1", 2120), d(12, "e", "w1", true, 2130),
		{T: KindCall, ID: 13, Key: "seq:5", Token: "f", Attempt: 1, Proc: "w1", At: ms(95)},
	}
	hist := []Transition{sent(10, "b", 72), sent(11, "d", 2112), sent(12, "e", 2132), sent(13, "f", 96)}
	killed := map[string]int64{"w2": ms(100)}

	replace := func(i int, l Line) []Line {
		out := append([]Line(nil), clean...)
		out[i] = l
		return out
	}
	for _, tc := range []struct {
		name   string
		rows   []Row
		lines  []Line
		hist   []Transition
		ends   map[string]int64
		want   string // "" = no problem
		counts func(OrderResult) int
	}{
		{"retry and redelivery in order", rows, clean, hist, killed, "", nil},
		{"a killed call still running when its message was redelivered", rows, clean, hist, map[string]int64{"w2": ms(2105)},
			"two handler calls at once", func(r OrderResult) int { return r.Overlaps }},
		{"a killed call whose process end is unknown never ends", rows, clean, hist, nil,
			"two handler calls at once", func(r OrderResult) int { return r.Overlaps }},
		{"two calls of one key at once", rows, replace(4, c(11, "seq:2", "c", "w2", 65)), hist, killed,
			"two handler calls at once", func(r OrderResult) int { return r.Overlaps }},
		{"redelivery after the next message", rows,
			append(append([]Line(nil), clean[:5]...), clean[7], clean[8], c(11, "seq:2", "d", "w1", 2200), d(11, "d", "w1", true, 2210), clean[9]),
			[]Transition{hist[0], sent(11, "d", 2212), hist[2], hist[3]}, killed,
			"a redelivery (or a late first call) after the key's next message", func(r OrderResult) int { return r.OutOfOrder }},
		{"next message before the previous one was SENT", rows, clean, []Transition{hist[0], sent(11, "d", 2125), hist[2], hist[3]}, killed,
			"called before position 2 (message 11) was recorded SENT", func(r OrderResult) int { return r.BeforeSent }},
		{"a message called after its SENT", rows, clean, []Transition{hist[0], sent(11, "c", 92), hist[2], hist[3]}, killed,
			"called after it was recorded SENT", func(r OrderResult) int { return r.AfterSent }},
		{"a skipped position", rows, append(append([]Line(nil), clean[:4]...), clean[7:]...), hist, killed,
			"called before positions 2..2 were", func(r OrderResult) int { return r.OutOfOrder }},
		{"completed out of order", rows, append(append([]Line(nil), clean...), d(11, "c", "w2", true, 2140)), hist, killed,
			"returned nil after", func(r OrderResult) int { return r.DoneOutOfOrder }},
		{"the row's seq is not the commit order", []Row{rows[0], {ID: 11, Key: "seq:2", Status: "SENT", OrderingKey: key, OrderingSeq: 3}, rows[2], rows[3]},
			clean, hist, killed, "the runtime's order is not the commit order", func(r OrderResult) int { return r.SeqMismatch }},
		{"delivered without its key", rows, replace(0, Line{T: KindCall, ID: 10, Key: "seq:1", Token: "a", Attempt: 1, Proc: "w1", At: ms(0)}), hist, killed,
			`delivered with OrderingKey ""`, func(r OrderResult) int { return r.KeyMismatch }},
		{"an unordered message delivered with a key", rows, replace(9, Line{T: KindCall, ID: 13, Key: "seq:5", Token: "f", Attempt: 1, Proc: "w1", Ord: key, At: ms(95)}), hist, killed,
			"enqueued without an ordering key", func(r OrderResult) int { return r.KeyMismatch }},
		{"a message never handled", rows, clean[:7], hist, killed, "the calls reached position 2 of 3", func(r OrderResult) int { return r.Unfinished }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := CheckOrder(enq, tc.rows, tc.lines, tc.hist, tc.ends, time.Millisecond)
			got := strings.Join(res.Problems, "\n")
			if tc.want == "" {
				if got != "" {
					t.Fatalf("want no problem, got:\n%s", got)
				}
				if res.Keys != 1 || res.Messages != 3 || res.Calls != 5 || res.OKCalls != 3 || res.Repeats != 2 || res.Redelivered != 1 {
					t.Fatalf("counts %s, want 1 key, 3 messages, 5 calls (3 ok), 2 repeats, 1 redelivered", res)
				}
				return
			}
			if !strings.Contains(got, tc.want) {
				t.Fatalf("want a problem containing %q, got:\n%s", tc.want, got)
			}
			if tc.counts(res) == 0 {
				t.Fatalf("the problem was not counted under its kind: %s", res)
			}
		})
	}
}
