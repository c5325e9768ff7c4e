package ledger

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// State is what the enqueuer knows about one message's transaction.
type State int

const (
	// Committed: InTx returned nil; the message must exist and be delivered.
	Committed State = iota
	// RolledBack: the transaction was rolled back on purpose; the message must never exist
	// and never be delivered.
	RolledBack
	// Aborted: an error before Commit (begin or insert failed); never committed, held to the
	// RolledBack rules but counted apart.
	Aborted
	// Ambiguous: the commit's outcome is unknown (the server went away during COMMIT); the
	// table decides, and if the row exists it is held to the Committed rules.
	Ambiguous
)

// stateNames are the States' names in enqd lines.
var stateNames = [...]string{Committed: "committed", RolledBack: "rolled_back", Aborted: "aborted", Ambiguous: "ambiguous"}

func (s State) String() string {
	if s < 0 || int(s) >= len(stateNames) {
		return fmt.Sprintf("State(%d)", int(s))
	}
	return stateNames[s]
}

// ParseState is the State named s (State.String); false when s names none.
func ParseState(s string) (State, bool) {
	for i, n := range stateNames {
		if n == s {
			return State(i), true
		}
	}
	return 0, false
}

// Expect is the final status a committed message must reach.
type Expect string

const (
	ExpectSent    Expect = "SENT"
	ExpectFailed  Expect = "FAILED"
	ExpectPending Expect = "PENDING" // an event type no worker handles: never claimed
)

// Enqueued is one message the suite tried to enqueue, by its idempotency key ("seq:N").
type Enqueued struct {
	Key    string
	State  State
	Expect Expect
	// OrderingKey is the ordering key the message was meant to have ("" for an unordered
	// message) and Index its place in that key's commit order (1, 2, ...), as the enqueuer
	// recorded it (see CheckOrder). Check ignores both.
	OrderingKey string
	Index       int64
}

// Produced is the enqueue record of the messages that worker processes enqueued themselves
// (relworker -produce-rate), built from their enq and enqd lines, for Check beside the test
// process's own record. A message takes the State of its enqd line; one without (its process
// was killed after the enq line and before the outcome's: before, during or after its commit)
// is Ambiguous, which Check holds to the Committed rules when its row exists and to none when
// it does not. cut counts those. problems are lines that do not fit: an outcome without its
// enq line, an unknown outcome, a key enqueued or concluded twice.
func Produced(lines []Line) (enq []Enqueued, cut int, problems []string) {
	idx := map[string]int{}
	for _, l := range lines {
		if l.T != KindEnqueue {
			continue
		}
		if _, dup := idx[l.Key]; dup {
			problems = append(problems, fmt.Sprintf("%s: enqueued twice (process %s): keys must be unique", l.Key, l.Proc))
			continue
		}
		idx[l.Key] = len(enq)
		enq = append(enq, Enqueued{Key: l.Key, State: Ambiguous, Expect: Expect(l.Expect)})
	}
	concluded := make([]bool, len(enq))
	for _, l := range lines {
		if l.T != KindEnqueued {
			continue
		}
		i, ok := idx[l.Key]
		s, known := ParseState(l.Outcome)
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("%s: an outcome (%s, process %s) without its enq line", l.Key, l.Outcome, l.Proc))
		case !known:
			problems = append(problems, fmt.Sprintf("%s: unknown outcome %q (process %s)", l.Key, l.Outcome, l.Proc))
		case concluded[i]:
			problems = append(problems, fmt.Sprintf("%s: a second outcome (%s, process %s)", l.Key, l.Outcome, l.Proc))
		default:
			concluded[i] = true
			enq[i].State = s
		}
	}
	for _, c := range concluded {
		if !c {
			cut++
		}
	}
	return enq, cut, problems
}

// Row is a message's final row in outbox_messages.
type Row struct {
	ID         int64
	Key        string
	EventType  string
	Status     string
	Attempts   int
	ClaimToken string // "" when NULL
	LastError  string
	// OrderingKey and OrderingSeq are the row's ordering_key and ordering_seq ("" and 0 when
	// NULL); only CheckOrder reads them.
	OrderingKey string
	OrderingSeq int64
}

// Result is the outcome of Check: counts for RELIABILITY.md and the problems that fail a test.
type Result struct {
	Enqueued, Committed, RolledBack, Aborted, Ambiguous, AmbiguousCommitted int
	Rows, Sent, Failed, Pending                                             int
	Calls, FailedCalls                                                      int
	// Duplicates: handler calls beyond the one whose result landed that did not fail
	// (returned nil, or never returned because their process died). Each is explained only
	// when its claim_token is not the token that wrote the final status.
	Duplicates, Explained int
	// Of the duplicates: the earlier call never returned (its process was killed, or it was
	// cut off at shutdown), or it returned nil and its fenced SENT write did not land.
	DupUnfinished, DupUnlanded int
	// Dups are the duplicate calls themselves, for callers that explain them further.
	Dups                []Line
	Lost, Ghosts, Stuck int
	// Transitions is the number of audited status changes CheckHistory read.
	Transitions int
	Problems    []string
}

func (r *Result) problem(format string, args ...any) {
	r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
}

// String is the one-line summary the scenarios log and RELIABILITY.md quotes.
func (r Result) String() string {
	return fmt.Sprintf("enqueued=%d committed=%d rolled_back=%d aborted=%d ambiguous=%d(committed %d) rows=%d sent=%d failed=%d pending=%d "+
		"calls=%d failed_calls=%d duplicates=%d (unfinished %d, unlanded %d) explained=%d lost=%d ghosts=%d stuck=%d transitions=%d problems=%d",
		r.Enqueued, r.Committed, r.RolledBack, r.Aborted, r.Ambiguous, r.AmbiguousCommitted, r.Rows, r.Sent, r.Failed, r.Pending,
		r.Calls, r.FailedCalls, r.Duplicates, r.DupUnfinished, r.DupUnlanded, r.Explained, r.Lost, r.Ghosts, r.Stuck, r.Transitions, len(r.Problems))
}

// Check holds the ledger against the enqueue record and the final rows:
//   - every committed message has exactly one row, which ends in its expected status; no row
//     is left PROCESSING; no rolled-back message has a row or a call;
//   - every call is of a row that exists, under that row's key; a (message, claim_token) pair
//     is called at most once (twice is a double dispatch of one claim: always a bug), and so
//     is a (message, attempt) pair (attempts count claims);
//   - a SENT row's final claim_token belongs to a call that returned nil (a result written
//     by any other claim means the fence failed), and it has at least one call;
//   - every other successful or unfinished call is a duplicate; when allowDup is false (no
//     fault injected) any duplicate is a problem.
func Check(enq []Enqueued, rows []Row, lines []Line, allowDup bool) Result {
	var r Result
	byKey := map[string]Row{}
	byID := map[int64]Row{}
	for _, row := range rows {
		if prev, dup := byKey[row.Key]; dup {
			r.problem("key %s has two rows (ids %d and %d): enqueued once", row.Key, prev.ID, row.ID)
		}
		byKey[row.Key] = row
		byID[row.ID] = row
	}
	r.Rows = len(rows)
	known := map[string]Enqueued{}
	for _, e := range enq {
		known[e.Key] = e
		r.Enqueued++
		row, exists := byKey[e.Key]
		switch e.State {
		case RolledBack, Aborted:
			if e.State == Aborted {
				r.Aborted++
			} else {
				r.RolledBack++
			}
			if exists {
				r.problem("%s: never committed, yet row %d exists (%s)", e.Key, row.ID, row.Status)
			}
			continue
		case Ambiguous:
			r.Ambiguous++
			if !exists {
				continue
			}
			r.AmbiguousCommitted++
		default:
			r.Committed++
			if !exists {
				r.Lost++
				r.problem("%s: committed, but no row: LOST", e.Key)
				continue
			}
		}
		switch row.Status {
		case "SENT":
			r.Sent++
		case "FAILED":
			r.Failed++
		case "PENDING":
			r.Pending++
		case "PROCESSING":
			r.Stuck++
		}
		if row.Status != string(e.Expect) {
			r.problem("%s (id %d): status %s, want %s (attempts %d, last_error %q)",
				e.Key, row.ID, row.Status, e.Expect, row.Attempts, row.LastError)
		}
		if row.Status == "FAILED" && row.LastError == "" {
			r.problem("%s (id %d): FAILED without last_error", e.Key, row.ID)
		}
	}
	for _, row := range rows {
		if _, ok := known[row.Key]; !ok {
			r.problem("row %d (key %q) was never enqueued", row.ID, row.Key)
		}
	}

	calls := map[int64][]Line{}
	done := map[string]Line{} // by id/token
	for _, l := range lines {
		switch l.T {
		case KindCall:
			r.Calls++
			calls[l.ID] = append(calls[l.ID], l)
		case KindDone:
			done[fmt.Sprintf("%d/%s", l.ID, l.Token)] = l
		}
	}
	ids := make([]int64, 0, len(calls))
	for id := range calls {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		cs := calls[id]
		row, ok := byID[id]
		if !ok {
			r.Ghosts++
			r.problem("message %d (key %s) was delivered %d time(s) but has no row: a rolled-back or unknown message was dispatched", id, cs[0].Key, len(cs))
			continue
		}
		tokens := map[string]int{}
		attempts := map[int]string{}
		for _, c := range cs {
			if c.Key != row.Key {
				r.problem("message %d: delivered with key %q, row has %q", id, c.Key, row.Key)
			}
			if c.Token == "" {
				r.problem("message %d: a call without a claim_token", id)
			}
			tokens[c.Token]++
			if tokens[c.Token] == 2 {
				r.problem("message %d: claim_token %s dispatched twice: a double dispatch of one claim", id, c.Token)
			}
			if prev, dup := attempts[c.Attempt]; dup && prev != c.Token {
				r.problem("message %d: attempt %d delivered under two claims (%s, %s): a claim did not count", id, c.Attempt, prev, c.Token)
			}
			attempts[c.Attempt] = c.Token
			if c.Attempt < 1 || c.Attempt > row.Attempts {
				r.problem("message %d: a call with attempt %d, row counts %d claims", id, c.Attempt, row.Attempts)
			}
		}
		if _, ok := known[row.Key]; ok && known[row.Key].Expect == ExpectPending {
			r.problem("message %d (%s): its type has no handler, yet it was delivered", id, row.EventType)
		}
		var succeeded []Line // returned nil, or never returned
		for _, c := range cs {
			d, finished := done[fmt.Sprintf("%d/%s", id, c.Token)]
			if finished && !d.OK {
				r.FailedCalls++
				continue
			}
			succeeded = append(succeeded, c)
		}
		if row.Status == "SENT" {
			fin, finished := done[fmt.Sprintf("%d/%s", id, row.ClaimToken)]
			switch {
			case row.ClaimToken == "":
				r.problem("message %d: SENT without the claim_token that wrote it", id)
			case tokens[row.ClaimToken] == 0:
				r.problem("message %d: SENT by claim %s, which never called a handler", id, row.ClaimToken)
			case !finished || !fin.OK:
				r.problem("message %d: SENT by claim %s, whose handler did not return nil (%q): a result written without a success", id, row.ClaimToken, fin.Err)
			}
		}
		if row.Status != "SENT" {
			// A FAILED row's calls are its failures (or a hang cut short by shutdown); its
			// expected status was checked above.
			continue
		}
		for _, c := range succeeded {
			if c.Token == row.ClaimToken {
				continue
			}
			r.Duplicates++
			r.Dups = append(r.Dups, c)
			if _, finished := done[fmt.Sprintf("%d/%s", id, c.Token)]; finished {
				r.DupUnlanded++
			} else {
				r.DupUnfinished++
			}
			// The call's result did not land: the row's final status was written under
			// another claim. The fence (status, claim_token) is what made it not land.
			if c.Token != row.ClaimToken {
				r.Explained++
			} else {
				r.problem("message %d: duplicate call under the final claim %s", id, c.Token)
			}
			if !allowDup {
				r.problem("message %d: duplicate delivery (claim %s, attempt %d, process %s) in a scenario without faults", id, c.Token, c.Attempt, c.Proc)
			}
		}
	}
	for _, e := range enq {
		if e.State == RolledBack || e.State == Aborted {
			continue
		}
		row, ok := byKey[e.Key]
		if !ok {
			continue
		}
		if row.Status == "SENT" && len(calls[row.ID]) == 0 {
			r.problem("message %d (%s): SENT without any handler call", row.ID, e.Key)
		}
	}
	return r
}

// Summary returns at most n problems, for a test failure message.
func (r Result) Summary(n int) string {
	if len(r.Problems) <= n {
		return strings.Join(r.Problems, "\n")
	}
	return strings.Join(r.Problems[:n], "\n") + fmt.Sprintf("\n... and %d more", len(r.Problems)-n)
}

// Transition is one row of the suite's audit table: a trigger on outbox_messages records every
// UPDATE that changes a row's status, claim_token or sent_at, inside the same transaction, so
// the history is exactly what committed.
type Transition struct {
	Seq                  int64
	ID                   int64
	OldStatus, NewStatus string
	OldToken, NewToken   string
	At                   time.Time // database clock (UTC_TIMESTAMP(6))
}

// CheckHistory adds what the final rows cannot show to r:
//   - SENT and FAILED are terminal: no committed write ever left them (no operator Retry runs
//     in the suite);
//   - a row became SENT once, from PROCESSING, under an unchanged claim_token;
//   - that SENT write committed after the claim's handler returned nil (its done line): a
//     SENT written while the owning claim's handler was still running came from someone else,
//     a worker that lost its claim writing without the fence.
//
// slack absorbs the database clock's microsecond truncation.
func CheckHistory(r *Result, hist []Transition, lines []Line, slack time.Duration) {
	done := map[string]Line{}
	for _, l := range lines {
		if l.T == KindDone {
			done[fmt.Sprintf("%d/%s", l.ID, l.Token)] = l
		}
	}
	sentTimes := map[int64]int{}
	for _, h := range hist {
		if h.OldStatus == "SENT" || h.OldStatus == "FAILED" {
			r.problem("message %d: left terminal status %s for %s (claim %s -> %s) at %s", h.ID, h.OldStatus, h.NewStatus, h.OldToken, h.NewToken, h.At.Format(time.RFC3339Nano))
		}
		if h.NewStatus != "SENT" || h.OldStatus == "SENT" {
			continue
		}
		sentTimes[h.ID]++
		if h.OldStatus != "PROCESSING" || h.OldToken != h.NewToken {
			r.problem("message %d: became SENT from %s, claim %s -> %s", h.ID, h.OldStatus, h.OldToken, h.NewToken)
		}
		d, ok := done[fmt.Sprintf("%d/%s", h.ID, h.NewToken)]
		switch {
		case !ok:
			r.problem("message %d: SENT under claim %s at %s, but that claim's handler never returned", h.ID, h.NewToken, h.At.Format(time.RFC3339Nano))
		case !d.OK:
			r.problem("message %d: SENT under claim %s, whose handler failed (%s)", h.ID, h.NewToken, d.Err)
		case time.Unix(0, d.At).After(h.At.Add(slack)):
			r.problem("message %d: SENT under claim %s at %s, %v before that claim's handler returned: a write by a worker that lost its claim",
				h.ID, h.NewToken, h.At.Format(time.RFC3339Nano), time.Unix(0, d.At).Sub(h.At))
		}
	}
	for id, n := range sentTimes {
		if n > 1 {
			r.problem("message %d: became SENT %d times", id, n)
		}
	}
	r.Transitions = len(hist)
}
