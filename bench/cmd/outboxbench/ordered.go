package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
)

// orderCheck watches the handler calls of an ordered drain (keys keys, round-robin: see
// orderingKey) and, after it, checks the runtime's contract against the database: messages of
// one key handled one at a time, in the order of their ordering_seq (the order their
// transactions committed), with no gaps. In the handler it costs two atomic adds per call and
// one compare-and-swap.
type orderCheck struct {
	n, keys  int
	inflight []atomic.Int32 // per key: handler calls running
	overlaps atomic.Int64   // a call began while another of its key ran
	bad      atomic.Int64   // payloads that did not parse or were out of range
	next     atomic.Int64
	ordinal  []atomic.Int64 // per sequence number: the position of its first handler call (1-based)
}

func newOrderCheck(n, keys int) *orderCheck {
	return &orderCheck{n: n, keys: keys, inflight: make([]atomic.Int32, keys), ordinal: make([]atomic.Int64, n)}
}

func (c *orderCheck) seqOf(p []byte) (int64, bool) {
	seq, err := payloadSeq(p)
	if err != nil || seq < 0 || seq >= int64(c.n) {
		c.bad.Add(1)
		return 0, false
	}
	return seq, true
}

// start is consumerConfig.OnStart: a handler call begins.
func (c *orderCheck) start(p []byte) {
	seq, ok := c.seqOf(p)
	if !ok {
		return
	}
	if c.inflight[seq%int64(c.keys)].Add(1) != 1 {
		c.overlaps.Add(1)
	}
	c.ordinal[seq].CompareAndSwap(0, c.next.Add(1))
}

// done is called as the handler call ends, before the worker records its result.
func (c *orderCheck) done(p []byte) {
	if seq, ok := c.seqOf(p); ok {
		c.inflight[seq%int64(c.keys)].Add(-1)
	}
}

// orderedRow is one message as the database holds it after the drain.
type orderedRow struct {
	key      string
	orderSeq int64 // ordering_seq: its place in its key's commit order
	seq      int64 // the payload's sequence number
}

// verify reads every message's ordering_key and ordering_seq and checks, per key, that the
// ordering_seq values are 1..m and that the handler calls came in that order; then that the
// queue of unsent ordered messages is empty and each key's counter equals its messages.
func (c *orderCheck) verify(ctx context.Context, db *sql.DB) (string, error) {
	rows, err := db.QueryContext(ctx, "SELECT ordering_key, ordering_seq, payload FROM outbox_messages")
	if err != nil {
		return "", err
	}
	var all []orderedRow
	var problems []string
	for rows.Next() {
		var key sql.NullString
		var oseq sql.NullInt64
		var payload []byte
		if err := rows.Scan(&key, &oseq, &payload); err != nil {
			rows.Close()
			return "", err
		}
		seq, err := payloadSeq(payload)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		if !key.Valid || !oseq.Valid {
			problems = append(problems, fmt.Sprintf("message seq %d stored without ordering_key or ordering_seq", seq))
			continue
		}
		all = append(all, orderedRow{key.String, oseq.Int64, seq})
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return "", err
	}
	ordinal := func(seq int64) int64 {
		if seq < 0 || seq >= int64(c.n) {
			return 0
		}
		return c.ordinal[seq].Load()
	}
	problems = append(problems, checkOrder(all, c.keys, ordinal)...)
	if o := c.overlaps.Load(); o > 0 {
		problems = append(problems, fmt.Sprintf("%d handler calls began while another of their key ran", o))
	}
	if b := c.bad.Load(); b > 0 {
		problems = append(problems, fmt.Sprintf("%d handler calls with a payload out of range", b))
	}
	var queued, counters, lastSeqs int64
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM outbox_ordering_queue").Scan(&queued); err != nil {
		return "", err
	}
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*), COALESCE(SUM(last_seq), 0) FROM outbox_ordering").Scan(&counters, &lastSeqs); err != nil {
		return "", err
	}
	if queued != 0 {
		problems = append(problems, fmt.Sprintf("outbox_ordering_queue holds %d entries after the drain", queued))
	}
	if want := int64(min(c.n, c.keys)); counters != want || lastSeqs != int64(c.n) {
		problems = append(problems, fmt.Sprintf("outbox_ordering: %d keys with last_seq summing to %d, want %d keys summing to %d", counters, lastSeqs, want, c.n))
	}
	if len(problems) > 0 {
		if len(problems) > 5 {
			problems = append(problems[:5], fmt.Sprintf("and %d more", len(problems)-5))
		}
		return "", errors.New("ordering: " + strings.Join(problems, "; "))
	}
	return fmt.Sprintf("ordering: %d messages over %d key(s), per key one handler call at a time, in commit order (ordering_seq 1..m), queue empty", len(all), min(c.n, c.keys)), nil
}

// checkOrder checks rows against the contract: every row's key is its sequence number's
// (orderingKey), each key's ordering_seq values are 1..m, and ordinal (the position of each
// sequence number's first handler call; 0: never handled, a loss the tracker counts) rises
// with ordering_seq.
func checkOrder(rows []orderedRow, keys int, ordinal func(seq int64) int64) []string {
	var problems []string
	byKey := map[string][]orderedRow{}
	for _, r := range rows {
		if want := orderingKey(r.seq, keys); r.key != want {
			problems = append(problems, fmt.Sprintf("message seq %d has ordering key %q, want %q", r.seq, r.key, want))
			continue
		}
		byKey[r.key] = append(byKey[r.key], r)
	}
	names := make([]string, 0, len(byKey))
	for k := range byKey {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		rs := byKey[k]
		sort.Slice(rs, func(i, j int) bool { return rs[i].orderSeq < rs[j].orderSeq })
		var prev orderedRow
		for i, r := range rs {
			if r.orderSeq != int64(i+1) {
				problems = append(problems, fmt.Sprintf("key %s: ordering_seq %d at position %d (want 1..%d without gaps)", k, r.orderSeq, i+1, len(rs)))
				break
			}
			o := ordinal(r.seq)
			if o == 0 {
				continue
			}
			if i > 0 && ordinal(prev.seq) > o {
				problems = append(problems, fmt.Sprintf("key %s: ordering_seq %d (seq %d) handled before ordering_seq %d (seq %d)", k, r.orderSeq, r.seq, prev.orderSeq, prev.seq))
				break
			}
			prev = r
		}
	}
	return problems
}

// orderedTxCheck checks an ordered W1 run: each committed transaction took its key's next
// number and queued its message (nothing consumed them).
func orderedTxCheck(keys int) *runCheck {
	return &runCheck{after: func(ctx context.Context, db *sql.DB, n int64) (string, error) {
		var queued, counters, lastSeqs int64
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM outbox_ordering_queue").Scan(&queued); err != nil {
			return "", err
		}
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*), COALESCE(SUM(last_seq), 0) FROM outbox_ordering").Scan(&counters, &lastSeqs); err != nil {
			return "", err
		}
		if queued != n || lastSeqs != n || counters > int64(keys) {
			return "", fmt.Errorf("ordering: %d committed, %d queued, %d keys with last_seq summing to %d", n, queued, counters, lastSeqs)
		}
		return fmt.Sprintf("ordering: %d messages over %d key(s), each key's counter and queue match", n, counters), nil
	}}
}

// orderedDrainCheck is the check of an ordered drain of n messages over keys keys.
func orderedDrainCheck(n, keys int) *runCheck {
	c := newOrderCheck(n, keys)
	return &runCheck{onStart: c.start, done: c.done, after: func(ctx context.Context, db *sql.DB, _ int64) (string, error) {
		return c.verify(ctx, db)
	}}
}
