package ledger

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

// OrderResult is the outcome of CheckOrder: counts for RELIABILITY.md and the problems that
// fail a test, each also counted by kind so that a control run can say which checks fired.
type OrderResult struct {
	// Keys and Messages: ordering keys and their committed messages; MaxPerKey is the most
	// messages one key had.
	Keys, Messages, MaxPerKey int
	// Calls and OKCalls: handler calls of ordered messages, and those whose done line says ok.
	Calls, OKCalls int
	// Repeats: calls of a message after its first call (retries after a failure and
	// redeliveries after a kill or an outage); Redelivered: messages with two or more calls
	// that returned nil or never returned (at-least-once at work).
	Repeats, Redelivered int

	// Problems by kind.
	SeqMismatch    int // the row's ordering_key/ordering_seq disagree with the recorded commit order
	KeyMismatch    int // Delivery.OrderingKey differs from the key the message was enqueued with
	Overlaps       int // two calls of one key running at once
	OutOfOrder     int // a call of position i after a call of a later position, or before an earlier one was called
	BeforeSent     int // position i+1 called before position i was recorded SENT
	AfterSent      int // a message called again after its own SENT
	DoneOutOfOrder int // done-ok lines of a key not in commit order
	Unfinished     int // a key whose calls never reached its last message, or a message never completed ok
	Problems       []string
}

func (r *OrderResult) problem(n *int, format string, args ...any) {
	*n++
	r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
}

// OrderViolations counts the problems that only a broken order produces (not the
// bookkeeping mismatches of SeqMismatch and KeyMismatch).
func (r OrderResult) OrderViolations() int {
	return r.Overlaps + r.OutOfOrder + r.BeforeSent + r.AfterSent + r.DoneOutOfOrder
}

// String is the one-line summary for the report.
func (r OrderResult) String() string {
	return fmt.Sprintf("keys=%d messages=%d (max %d per key) calls=%d ok_calls=%d repeats=%d redelivered=%d | "+
		"overlaps=%d out_of_order=%d before_sent=%d after_sent=%d done_out_of_order=%d seq_mismatch=%d key_mismatch=%d unfinished=%d problems=%d",
		r.Keys, r.Messages, r.MaxPerKey, r.Calls, r.OKCalls, r.Repeats, r.Redelivered,
		r.Overlaps, r.OutOfOrder, r.BeforeSent, r.AfterSent, r.DoneOutOfOrder, r.SeqMismatch, r.KeyMismatch, r.Unfinished, len(r.Problems))
}

// Summary returns at most n problems, for a test failure message.
func (r OrderResult) Summary(n int) string {
	if len(r.Problems) <= n {
		return strings.Join(r.Problems, "\n")
	}
	return strings.Join(r.Problems[:n], "\n") + fmt.Sprintf("\n... and %d more", len(r.Problems)-n)
}

// ordMsg is one committed ordered message.
type ordMsg struct {
	key   string // idempotency key, seq:N
	okey  string // ordering key
	index int64
	row   Row
}

type ordCall struct {
	Line
	msg   *ordMsg
	end   int64 // when the call had certainly ended (done line, else its process's end)
	done  *Line
	endBy string
}

// CheckOrder holds the handler calls of ordered messages against the commit order the
// enqueuers recorded (Enqueued.OrderingKey and Index: the position of the message among the
// committed messages of its key, read under a lock that serialises the key until commit).
// Messages count when committed, or ambiguous with a row. Per ordering key:
//   - the recorded positions are 1..N, and each row carries that key and ordering_seq equal to
//     its position (the runtime's seq is the commit order, and a rollback left no gap);
//   - every call carries the key in Delivery.OrderingKey (the ledger's ord);
//   - no two calls overlap in time: a call lasts from its call line to its done line, or, when
//     its process died first, to that process's end (procEnd: the suite's kill time, else the
//     process's exit line; a call with neither is taken as never ending);
//   - taken in the order they began, the calls go through the positions 1, 2, ..., N without
//     going back or skipping: position i may be called again (a retry, or a redelivery when
//     its earlier call's SENT was not recorded) only until position i+1 is first called, and
//     position i+1 is first called only after position i was recorded SENT (the audit trail's
//     SENT transition, hist); no message is called after its own SENT;
//   - the calls that returned nil (done ok), taken in the order they returned, follow the
//     positions too, and every position has one.
//
// slack absorbs the database clock's microsecond truncation, as in CheckHistory.
func CheckOrder(enq []Enqueued, rows []Row, lines []Line, hist []Transition, procEnd map[string]int64, slack time.Duration) OrderResult {
	var r OrderResult
	rowByKey := map[string]Row{}
	for _, row := range rows {
		rowByKey[row.Key] = row
	}
	sentAt := map[int64]int64{} // message id -> when its SENT write's statement began (UnixNano)
	for _, h := range hist {
		if h.NewStatus == "SENT" && h.OldStatus != "SENT" {
			if _, seen := sentAt[h.ID]; !seen {
				sentAt[h.ID] = h.At.UnixNano()
			}
		}
	}
	byKey := map[string][]*ordMsg{}
	msgs := map[string]*ordMsg{} // by idempotency key
	unordered := map[string]bool{}
	for _, e := range enq {
		row, exists := rowByKey[e.Key]
		if !exists || (e.State != Committed && e.State != Ambiguous) {
			continue // lost or never committed: Check's business
		}
		if e.OrderingKey == "" {
			unordered[e.Key] = true
			continue
		}
		m := &ordMsg{key: e.Key, okey: e.OrderingKey, index: e.Index, row: row}
		msgs[e.Key] = m
		byKey[e.OrderingKey] = append(byKey[e.OrderingKey], m)
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	r.Keys = len(keys)
	pos := map[string]map[int64]*ordMsg{} // key -> position -> message
	for _, k := range keys {
		ms := byKey[k]
		sort.Slice(ms, func(i, j int) bool { return ms[i].index < ms[j].index })
		r.Messages += len(ms)
		r.MaxPerKey = max(r.MaxPerKey, len(ms))
		pos[k] = map[int64]*ordMsg{}
		for i, m := range ms {
			if m.index != int64(i+1) {
				r.problem(&r.SeqMismatch, "key %s: recorded commit positions are not 1..%d (position %d at place %d, message %s): the enqueuers' record is broken",
					k, len(ms), m.index, i+1, m.key)
			}
			pos[k][m.index] = m
			// Retention drops the counter of a key with nothing queued, and the key's next
			// message starts again at seq 1. Otherwise each seq is the one before plus one: a
			// gap is a seq taken by an enqueue that did not commit, a repeat two messages in
			// one place.
			var prev int64
			if i > 0 {
				prev = ms[i-1].row.OrderingSeq
			}
			if m.row.OrderingKey != k || (m.row.OrderingSeq != prev+1 && m.row.OrderingSeq != 1) {
				r.problem(&r.SeqMismatch, "message %d (%s) committed as position %d of key %s, but its row has ordering_key %q ordering_seq %d after seq %d: the runtime's order is not the commit order",
					m.row.ID, m.key, m.index, k, m.row.OrderingKey, m.row.OrderingSeq, prev)
			}
		}
	}

	// Process ends: the suite's kill times, else the exit line.
	ends := map[string]int64{}
	for p, t := range procEnd {
		ends[p] = t
	}
	doneBy := map[string]*Line{}
	for i := range lines {
		l := &lines[i]
		switch l.T {
		case KindExit:
			if _, ok := ends[l.Proc]; !ok {
				ends[l.Proc] = l.At
			}
		case KindDone:
			doneBy[fmt.Sprintf("%d/%s", l.ID, l.Token)] = l
		}
	}
	callsByKey := map[string][]*ordCall{}
	callsByMsg := map[string][]*ordCall{}
	for i := range lines {
		l := lines[i]
		if l.T != KindCall {
			continue
		}
		m, ok := msgs[l.Key]
		if !ok {
			if unordered[l.Key] && l.Ord != "" {
				r.problem(&r.KeyMismatch, "message %d (%s) was enqueued without an ordering key, delivered with OrderingKey %q", l.ID, l.Key, l.Ord)
			}
			continue
		}
		r.Calls++
		if l.Ord != m.okey {
			r.problem(&r.KeyMismatch, "message %d (%s) of key %s delivered with OrderingKey %q (claim %s, %s)", l.ID, l.Key, m.okey, l.Ord, l.Token, l.Proc)
		}
		c := &ordCall{Line: l, msg: m}
		if d, ok := doneBy[fmt.Sprintf("%d/%s", l.ID, l.Token)]; ok {
			c.done, c.end, c.endBy = d, d.At, "returned"
			if d.OK {
				r.OKCalls++
			}
		} else if t, ok := ends[l.Proc]; ok {
			c.end, c.endBy = t, "its process ended"
		} else {
			c.end, c.endBy = math.MaxInt64, "never ended"
		}
		callsByKey[m.okey] = append(callsByKey[m.okey], c)
		callsByMsg[m.key] = append(callsByMsg[m.key], c)
	}
	for _, cs := range callsByMsg {
		r.Repeats += len(cs) - 1
		succeeded := 0
		for _, c := range cs {
			if c.done == nil || c.done.OK {
				succeeded++
			}
		}
		if succeeded > 1 {
			r.Redelivered++
		}
	}

	ts := func(ns int64) string {
		if ns == math.MaxInt64 {
			return "never"
		}
		return time.Unix(0, ns).UTC().Format("15:04:05.000000")
	}
	desc := func(c *ordCall) string {
		return fmt.Sprintf("position %d (message %d, claim %s, attempt %d, %s, %s..%s)", c.msg.index, c.ID, c.Token, c.Attempt, c.Proc, ts(c.At), ts(c.end))
	}
	for _, k := range keys {
		cs := callsByKey[k]
		sort.SliceStable(cs, func(i, j int) bool { return cs[i].At < cs[j].At })
		n := int64(len(byKey[k]))
		var at int64 // the highest position called so far
		var busy *ordCall
		for _, c := range cs {
			if busy != nil && c.At < busy.end {
				r.problem(&r.Overlaps, "key %s: two handler calls at once: %s began while %s had not ended (%s)", k, desc(c), desc(busy), busy.endBy)
			}
			if busy == nil || c.end > busy.end {
				busy = c
			}
			if s, ok := sentAt[c.ID]; ok && c.At > s+slack.Nanoseconds() {
				r.problem(&r.AfterSent, "key %s: %s called after it was recorded SENT at %s", k, desc(c), ts(s))
			}
			switch i := c.msg.index; {
			case i == at:
				// A retry after a failed call, or a redelivery of a call whose SENT was not recorded.
			case i == at+1:
				if prev := pos[k][at]; prev != nil {
					s, ok := sentAt[prev.row.ID]
					switch {
					case !ok:
						r.problem(&r.BeforeSent, "key %s: %s called, but position %d (message %d) was never recorded SENT", k, desc(c), at, prev.row.ID)
					case c.At+slack.Nanoseconds() < s:
						r.problem(&r.BeforeSent, "key %s: %s called before position %d (message %d) was recorded SENT at %s", k, desc(c), at, prev.row.ID, ts(s))
					}
				}
				at = i
			case i < at:
				r.problem(&r.OutOfOrder, "key %s: %s called after position %d had been called: a redelivery (or a late first call) after the key's next message", k, desc(c), at)
			default:
				r.problem(&r.OutOfOrder, "key %s: %s called before positions %d..%d were", k, desc(c), at+1, i-1)
				at = i
			}
		}
		if at != n {
			r.problem(&r.Unfinished, "key %s: the calls reached position %d of %d", k, at, n)
		}
		// The calls that completed ok, in the order they returned.
		var oks []*ordCall
		for _, c := range cs {
			if c.done != nil && c.done.OK {
				oks = append(oks, c)
			}
		}
		sort.SliceStable(oks, func(i, j int) bool { return oks[i].done.At < oks[j].done.At })
		var last *ordCall
		completed := map[int64]bool{}
		for _, c := range oks {
			completed[c.msg.index] = true
			if last != nil && c.msg.index < last.msg.index {
				r.problem(&r.DoneOutOfOrder, "key %s: %s returned nil after %s had", k, desc(c), desc(last))
			}
			if last == nil || c.msg.index > last.msg.index {
				last = c
			}
		}
		for i := int64(1); i <= n; i++ {
			if m := pos[k][i]; m != nil && !completed[i] {
				r.problem(&r.Unfinished, "key %s: position %d (message %d) has no call that returned nil", k, i, m.row.ID)
			}
		}
	}
	return r
}
