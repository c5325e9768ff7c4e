//go:build reliability

package reliability

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/reliability/internal/ledger"
	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// outageType is the circuit scenario's failing type, handled by relworker -outage-type.
const outageType = "rel.mail"

// Scenario 12: one type's provider is down for 60 s while 100 of its messages a second are
// enqueued, beside a healthy type. The type's circuit backs it off as a whole. Measured against
// a baseline without a circuit (every message retried on its backoff for the whole outage):
// provider calls during the outage, log lines, messages FAILED, the healthy type's latency, and
// the drain after recovery.
func TestCircuitOutage(t *testing.T) {
	const (
		warmup     = 10 * time.Second
		outage     = 60 * time.Second
		after      = 5 * time.Second
		mailRate   = 100 // messages a second of the failing type
		msgRate    = 50  // of the healthy type
		attempts   = 25  // each message's budget: at 1s..4s of backoff, longer than the outage
		backoff    = time.Second
		drainLimit = 30 * time.Second
	)
	e := newEnv(t, "circuit")
	down := filepath.Join(e.dir, "provider-down")
	w := e.startWorker("w1", workerOpts{flags: baseFlags("-concurrency", "32", "-batch", "64", "-backoff", backoff.String(),
		"-outage-type", outageType, "-outage-file", down)})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// Paced enqueuers, one message per transaction, so each message's created_at is its own.
	var wg sync.WaitGroup
	pace := func(eventType string, rate int) {
		defer wg.Done()
		tick := time.NewTicker(time.Second / time.Duration(rate))
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				m := okMsg(0)
				m.EventType, m.MaxAttempts = eventType, attempts
				if err := e.enqueueTx(ctx, []spec{m}, false); err != nil && ctx.Err() == nil {
					t.Errorf("enqueue %s: %v", eventType, err)
					return
				}
			}
		}
	}
	wg.Add(2)
	go pace(outageType, mailRate)
	go pace(eventType, msgRate)

	dbNow := func() time.Time {
		var at time.Time
		if err := e.db.QueryRow("SELECT UTC_TIMESTAMP(6)").Scan(&at); err != nil {
			t.Fatal(err)
		}
		return at
	}
	time.Sleep(warmup) // the healthy latency before the outage, measured below
	begin := dbNow()
	beginLocal := time.Now()
	if err := os.WriteFile(down, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// The fleet's view, from the table: the type shows failing within a minute.
	seenFailing := time.Duration(-1)
	for time.Since(beginLocal) < outage {
		if seenFailing < 0 {
			s, err := outbox.Stats(ctx, e.db)
			if err != nil {
				t.Fatal(err)
			}
			if s.ByType[outageType].Failing {
				seenFailing = time.Since(beginLocal)
			}
		}
		time.Sleep(time.Second)
	}
	if err := os.Remove(down); err != nil {
		t.Fatal(err)
	}
	end := dbNow()
	endLocal := time.Now()
	time.Sleep(after)
	cancel()
	wg.Wait()

	// Every message enqueued up to the end of the outage is delivered within drainLimit of it.
	e.waitFor(drainLimit+after+10*time.Second, "every message SENT or FAILED", throttled(200*time.Millisecond, func() bool {
		var n int
		if err := e.db.QueryRow(`SELECT COUNT(*) FROM outbox_messages WHERE status IN ('PENDING', 'PROCESSING')`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 0
	}))
	e.requireAlive(w)

	var failed, mailN int
	var lastSent time.Time
	if err := e.db.QueryRow(`SELECT CAST(COALESCE(SUM(status = 'FAILED'), 0) AS SIGNED), COUNT(*), MAX(sent_at) FROM outbox_messages
		WHERE event_type = ? AND created_at <= ?`, outageType, end).Scan(&failed, &mailN, &lastSent); err != nil {
		t.Fatal(err)
	}
	drain := lastSent.Sub(end)

	// The baseline: each message of the type enqueued before the outage ended, retried on its
	// backoff until the outage ends or its budget is spent. The backoff's jitter averages 1.25x.
	created := e.createdAt(outageType, begin.Add(-time.Minute), end)
	baseline, during := 0, 0
	for _, c := range created {
		if !c.Before(begin) {
			during++
		}
		from := c
		if from.Before(begin) {
			from = begin
		}
		baseline += attemptsWithin(end.Sub(from), backoff, 4*backoff, attempts)
	}

	res, lines, _ := e.check(false, "one type's provider down for 60 s beside a healthy type")
	calls, probes := 0, map[int64]bool{}
	for _, l := range lines {
		if l.T == ledger.KindDone && strings.Contains(l.Err, "provider unavailable (outage)") {
			calls++
			probes[l.ID] = true
		}
	}
	mailLines := e.countLogLines("event_type=" + outageType)
	circuitLines := e.countLogLines("outbox circuit")
	p99Before := e.latencyP99(eventType, beginLocal.Add(-warmup), beginLocal)
	p99During := e.latencyP99(eventType, beginLocal, endLocal)

	report(fmt.Sprintf("circuit: %d msgs of %s enqueued during %s of outage (%d up to its end) at %d/s beside %s at %d/s; provider calls during the outage %d vs baseline %d (%.2f%%), on %d messages; "+
		"Stats showed it failing after %s; log lines naming the type %d (circuit lines %d); FAILED %d; healthy p99 %s before, %s during; last message SENT %s after recovery; committed %d",
		during, outageType, outage, mailN, mailRate, eventType, msgRate, calls, baseline, 100*float64(calls)/float64(max(baseline, 1)), len(probes),
		seenFailing.Round(time.Second), mailLines, circuitLines, failed, p99Before, p99During, drain.Round(time.Millisecond), res.Committed))
	if seenFailing < 0 || seenFailing > time.Minute {
		t.Errorf("outbox.Stats showed the type failing %s after the outage began, want within a minute", seenFailing)
	}
	if calls*10 > baseline {
		t.Errorf("provider calls during the outage: %d, want at most a tenth of the baseline %d", calls, baseline)
	}
	if mailLines >= 50 {
		t.Errorf("%d log lines name the failing type, want under 50", mailLines)
	}
	if circuitLines < 2 {
		t.Errorf("%d circuit lines, want its opening and its closing", circuitLines)
	}
	if failed != 0 {
		t.Errorf("%d messages FAILED because of an outage shorter than their attempts' budget, want 0", failed)
	}
	if p99During > 3*p99Before+250*time.Millisecond {
		t.Errorf("healthy type's p99 latency %s during the outage, %s before: want it about unchanged", p99During, p99Before)
	}
	if drain > drainLimit {
		t.Errorf("last message SENT %s after recovery, want within %s", drain, drainLimit)
	}
}

// attemptsWithin is how many attempts a message retried on its backoff makes in d: the first at
// once, then after each wait, of the mean 1.25x its base, up to budget.
func attemptsWithin(d, initial, maxWait time.Duration, budget int) int {
	n, at := 1, time.Duration(0)
	for n < budget {
		base := min(initial<<(n-1), maxWait)
		at += base + base/4
		if at > d {
			break
		}
		n++
	}
	return n
}

// createdAt lists the created_at of eventType's rows created in [from, to], by the database
// clock.
func (e *env) createdAt(eventType string, from, to time.Time) []time.Time {
	e.t.Helper()
	rs, err := e.db.Query(`SELECT created_at FROM outbox_messages WHERE event_type = ? AND created_at BETWEEN ? AND ?`, eventType, from, to)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rs.Close()
	var out []time.Time
	for rs.Next() {
		var c time.Time
		if err := rs.Scan(&c); err != nil {
			e.t.Fatal(err)
		}
		out = append(out, c)
	}
	return out
}

// latencyP99 is the 99th percentile of sent_at - created_at of eventType's rows enqueued in
// [from, to) by the local clock, which the enqueuers share with this process.
func (e *env) latencyP99(eventType string, from, to time.Time) time.Duration {
	e.t.Helper()
	var skew time.Duration
	var dbNow time.Time
	local := time.Now()
	if err := e.db.QueryRow("SELECT UTC_TIMESTAMP(6)").Scan(&dbNow); err != nil {
		e.t.Fatal(err)
	}
	skew = dbNow.Sub(local)
	rs, err := e.db.Query(`SELECT TIMESTAMPDIFF(MICROSECOND, created_at, sent_at) FROM outbox_messages
		WHERE event_type = ? AND status = 'SENT' AND created_at >= ? AND created_at < ?`, eventType, from.Add(skew).UTC(), to.Add(skew).UTC())
	if err != nil {
		e.t.Fatal(err)
	}
	defer rs.Close()
	var lat []time.Duration
	for rs.Next() {
		var us int64
		if err := rs.Scan(&us); err != nil {
			e.t.Fatal(err)
		}
		lat = append(lat, time.Duration(us)*time.Microsecond)
	}
	if len(lat) == 0 {
		e.t.Errorf("no %s message SENT among those enqueued between %s and %s", eventType, from, to)
		return 0
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return lat[len(lat)*99/100].Round(time.Millisecond)
}
