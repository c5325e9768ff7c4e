package ledger

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func call(id int64, key, tok string, attempt int) Line {
	return Line{T: KindCall, ID: id, Key: key, Token: tok, Attempt: attempt, Proc: "w1"}
}
func done(id int64, tok string, ok bool) Line {
	return Line{T: KindDone, ID: id, Token: tok, OK: ok, Proc: "w1"}
}

// Each case is a record that must (or must not) raise the named problem.
func TestCheck(t *testing.T) {
	enq := []Enqueued{
		{Key: "seq:1", State: Committed, Expect: ExpectSent},
		{Key: "seq:2", State: RolledBack, Expect: ExpectSent},
		{Key: "seq:3", State: Committed, Expect: ExpectFailed},
	}
	rows := []Row{
		{ID: 1, Key: "seq:1", Status: "SENT", Attempts: 2, ClaimToken: "b"},
		{ID: 3, Key: "seq:3", Status: "FAILED", Attempts: 1, ClaimToken: "c", LastError: "boom"},
	}
	// Claim a's handler succeeded but its write did not land (reclaimed); claim b's did.
	clean := []Line{call(1, "seq:1", "a", 1), done(1, "a", true), call(1, "seq:1", "b", 2), done(1, "b", true),
		call(3, "seq:3", "c", 1), done(3, "c", false)}

	for _, tc := range []struct {
		name     string
		rows     []Row
		lines    []Line
		allowDup bool
		want     string // "" = no problem
		dups     int
	}{
		{"explained duplicate under faults", rows, clean, true, "", 1},
		{"duplicate without faults", rows, clean, false, "in a scenario without faults", 1},
		{"lost", rows[1:], clean[4:], true, "LOST", 0},
		{"rolled back but delivered", rows, append(clean, call(2, "seq:2", "z", 1)), true, "has no row", 1},
		{"double dispatch of one claim", rows, append(clean, call(1, "seq:1", "b", 2)), true, "dispatched twice", 1},
		{"attempt not counted", rows, append(clean[:4:4], call(1, "seq:1", "x", 2), clean[4], clean[5]), true, "attempt 2 delivered under two claims", 2},
		{"SENT by a failed claim", []Row{{ID: 1, Key: "seq:1", Status: "SENT", Attempts: 2, ClaimToken: "a"}, rows[1]},
			[]Line{call(1, "seq:1", "a", 1), done(1, "a", false), call(1, "seq:1", "b", 2), done(1, "b", true), clean[4], clean[5]}, true, "did not return nil", 1},
		{"stuck", []Row{{ID: 1, Key: "seq:1", Status: "PROCESSING", Attempts: 2, ClaimToken: "b"}, rows[1]}, clean, true, "status PROCESSING", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := Check(enq, tc.rows, tc.lines, tc.allowDup)
			got := strings.Join(res.Problems, "\n")
			if tc.want == "" && got != "" {
				t.Fatalf("want no problem, got:\n%s", got)
			}
			if tc.want != "" && !strings.Contains(got, tc.want) {
				t.Fatalf("want a problem containing %q, got:\n%s", tc.want, got)
			}
			if res.Duplicates != tc.dups {
				t.Fatalf("duplicates = %d, want %d (%s)", res.Duplicates, tc.dups, res)
			}
		})
	}
}

func TestProduced(t *testing.T) {
	enq := func(key string) Line { return Line{T: KindEnqueue, Key: key, Expect: string(ExpectSent), Proc: "w1.1"} }
	out := func(key string, s State) Line {
		return Line{T: KindEnqueued, Key: key, Outcome: s.String(), Proc: "w1.1"}
	}
	lines := []Line{
		enq("w1.1/seq:1"), out("w1.1/seq:1", Committed),
		enq("w1.1/seq:2"), enq("w1.1/seq:3"), out("w1.1/seq:2", RolledBack), out("w1.1/seq:3", RolledBack),
		enq("w1.1/seq:4"), out("w1.1/seq:4", Aborted),
		enq("w1.1/seq:5"), out("w1.1/seq:5", Ambiguous),
		enq("w1.1/seq:6"), // killed before its outcome line: committed, as the row shows
		enq("w1.1/seq:7"), // killed before its outcome line: never committed
		call(1, "w1.1/seq:1", "h", 1), done(1, "h", true),
		call(6, "w1.1/seq:6", "h", 1), // killed mid-call
		call(6, "w1.1/seq:6", "r", 2), done(6, "r", true),
	}
	got, cut, problems := Produced(lines)
	if len(problems) != 0 || cut != 2 {
		t.Fatalf("cut %d, problems %q; want 2 cut and no problem", cut, problems)
	}
	want := map[string]State{"w1.1/seq:1": Committed, "w1.1/seq:2": RolledBack, "w1.1/seq:3": RolledBack, "w1.1/seq:4": Aborted,
		"w1.1/seq:5": Ambiguous, "w1.1/seq:6": Ambiguous, "w1.1/seq:7": Ambiguous}
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d: %+v", len(got), len(want), got)
	}
	for _, e := range got {
		if e.State != want[e.Key] || e.Expect != ExpectSent {
			t.Errorf("%s: %v, expect %s; want %v, expect SENT", e.Key, e.State, e.Expect, want[e.Key])
		}
	}
	rows := []Row{{ID: 1, Key: "w1.1/seq:1", Status: "SENT", Attempts: 1, ClaimToken: "h"}, {ID: 6, Key: "w1.1/seq:6", Status: "SENT", Attempts: 2, ClaimToken: "r"}}
	res := Check(got, rows, lines, true)
	if len(res.Problems) != 0 || res.Committed != 1 || res.RolledBack != 2 || res.Aborted != 1 || res.Ambiguous != 3 || res.AmbiguousCommitted != 1 || res.DupUnfinished != 1 {
		t.Fatalf("Check of the produced record: %s\n%s", res, res.Summary(10))
	}
	// The cut message whose row exists is held to the committed rules: without its row's
	// success, a problem.
	rows[1].Status = "PENDING"
	if res := Check(got, rows, lines, true); !strings.Contains(strings.Join(res.Problems, "\n"), "status PENDING, want SENT") {
		t.Fatalf("a cut message with a row is not held to the committed rules: %q", res.Problems)
	}

	for _, tc := range []struct {
		name  string
		lines []Line
		want  string
	}{
		{"outcome without enq", []Line{out("w1.1/seq:9", Committed)}, "without its enq line"},
		{"key enqueued twice", []Line{enq("w1.1/seq:1"), enq("w1.1/seq:1")}, "enqueued twice"},
		{"two outcomes", []Line{enq("w1.1/seq:1"), out("w1.1/seq:1", Committed), out("w1.1/seq:1", Ambiguous)}, "a second outcome"},
		{"unknown outcome", []Line{enq("w1.1/seq:1"), {T: KindEnqueued, Key: "w1.1/seq:1", Outcome: "maybe"}}, "unknown outcome"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, problems := Produced(tc.lines)
			if got := strings.Join(problems, "\n"); !strings.Contains(got, tc.want) {
				t.Fatalf("want a problem containing %q, got %q", tc.want, got)
			}
		})
	}
}

func TestWriterRead(t *testing.T) {
	dir := t.TempDir()
	w, err := Create(filepath.Join(dir, "w1.jsonl"), "w1")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(call(7, "seq:7", "t", 1)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	// A torn line is counted, not parsed.
	f, err := os.OpenFile(filepath.Join(dir, "w1.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"t":"call","id":`); err != nil {
		t.Fatal(err)
	}
	f.Close()
	lines, torn, err := ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 1 || torn != 1 || lines[0].ID != 7 || lines[0].Proc != "w1" || lines[0].At == 0 {
		t.Fatalf("got %+v torn=%d; want one call line for id 7 and one torn line", lines, torn)
	}
}

// ReadFrom reads on from where it stopped and leaves a line still being written for later.
func TestReadFrom(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w1.jsonl")
	if lines, next, err := ReadFrom(path, 0); err != nil || len(lines) != 0 || next != 0 {
		t.Fatalf("no file yet: got %d lines, next %d, %v; want none at 0", len(lines), next, err)
	}
	w, err := Create(path, "w1")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Write(call(7, "seq:7", "t", 1)); err != nil {
		t.Fatal(err)
	}
	lines, next, err := ReadFrom(path, 0)
	if err != nil || len(lines) != 1 || lines[0].ID != 7 {
		t.Fatalf("first read: got %+v, %v; want the call line of id 7", lines, err)
	}
	if lines, again, err := ReadFrom(path, next); err != nil || len(lines) != 0 || again != next {
		t.Fatalf("nothing new: got %d lines, next %d (was %d), %v", len(lines), again, next, err)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(`{"t":"done","id":8,`); err != nil {
		t.Fatal(err)
	}
	if lines, again, err := ReadFrom(path, next); err != nil || len(lines) != 0 || again != next {
		t.Fatalf("a line being written: got %+v, next %d (was %d), %v; want it left for later", lines, again, next, err)
	}
	if _, err := f.WriteString(`"tok":"t"}` + "\n"); err != nil {
		t.Fatal(err)
	}
	if lines, _, err := ReadFrom(path, next); err != nil || len(lines) != 1 || lines[0].T != KindDone || lines[0].ID != 8 {
		t.Fatalf("once written: got %+v, %v; want the done line of id 8", lines, err)
	}
}

func TestCheckHistory(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	doneAt := func(id int64, tok string, ok bool, at time.Time) Line {
		l := done(id, tok, ok)
		l.At = at.UnixNano()
		return l
	}
	lines := []Line{call(1, "seq:1", "b", 2), doneAt(1, "b", true, t0.Add(100*time.Millisecond))}
	claim := Transition{ID: 1, OldStatus: "PENDING", NewStatus: "PROCESSING", NewToken: "b", At: t0}
	for _, tc := range []struct {
		name string
		hist []Transition
		want string
	}{
		{"sent after the handler returned", []Transition{claim, {ID: 1, OldStatus: "PROCESSING", NewStatus: "SENT", OldToken: "b", NewToken: "b", At: t0.Add(101 * time.Millisecond)}}, ""},
		{"sent while the owner's handler still ran", []Transition{claim, {ID: 1, OldStatus: "PROCESSING", NewStatus: "SENT", OldToken: "b", NewToken: "b", At: t0.Add(50 * time.Millisecond)}}, "a write by a worker that lost its claim"},
		{"left SENT", []Transition{claim, {ID: 1, OldStatus: "PROCESSING", NewStatus: "SENT", OldToken: "b", NewToken: "b", At: t0.Add(101 * time.Millisecond)},
			{ID: 1, OldStatus: "SENT", NewStatus: "PENDING", OldToken: "b", NewToken: "b", At: t0.Add(200 * time.Millisecond)}}, "left terminal status SENT"},
		{"sent by a claim with no handler call", []Transition{{ID: 1, OldStatus: "PROCESSING", NewStatus: "SENT", OldToken: "z", NewToken: "z", At: t0}}, "never returned"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r Result
			CheckHistory(&r, tc.hist, lines, time.Millisecond)
			got := strings.Join(r.Problems, "\n")
			if tc.want == "" && got != "" {
				t.Fatalf("want no problem, got:\n%s", got)
			}
			if tc.want != "" && !strings.Contains(got, tc.want) {
				t.Fatalf("want a problem containing %q, got:\n%s", tc.want, got)
			}
		})
	}
}
