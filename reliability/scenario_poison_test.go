//go:build reliability

package reliability

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/reliability/internal/ledger"
)

// Scenario 5: poison messages each end in their documented state while the worker keeps
// delivering everything else.
func TestPoison(t *testing.T) {
	e := newEnv(t, "poison")
	// timeout 500ms < lease 2s; 8 slots, of which the two hanging messages hold at most 4.
	w := e.startWorker("w1", workerOpts{flags: baseFlags("-concurrency", "8", "-batch", "8")})
	ctx := context.Background()
	must := func(msgs []spec) {
		t.Helper()
		if err := e.enqueueTx(ctx, msgs, false); err != nil {
			t.Fatal(err)
		}
	}
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	type group struct {
		name   string
		n      int
		spec   func() spec
		status ledger.Expect
	}
	groups := []group{
		{"undecodable", 3, func() spec {
			return spec{Payload: raw(`{"seq":"not a number","mode":7}`), MaxAttempts: 5, Expect: ledger.ExpectFailed}
		}, ledger.ExpectFailed},
		{"unhandled type", 3, func() spec {
			return spec{EventType: nobody, Payload: map[string]any{"mode": "ok"}, MaxAttempts: 5, Expect: ledger.ExpectPending}
		}, ledger.ExpectPending},
		{"panic", 3, func() spec {
			return spec{Payload: map[string]any{"mode": "panic"}, MaxAttempts: 3, Expect: ledger.ExpectFailed}
		}, ledger.ExpectFailed},
		{"hang", 2, func() spec {
			return spec{Payload: map[string]any{"mode": "hang", "ms": 3000}, MaxAttempts: 2, Expect: ledger.ExpectFailed}
		}, ledger.ExpectFailed},
		{"late success", 3, func() spec {
			return spec{Payload: map[string]any{"mode": "lateok"}, MaxAttempts: 5, Expect: ledger.ExpectSent}
		}, ledger.ExpectSent},
		{"permanent", 3, func() spec {
			return spec{Payload: map[string]any{"mode": "perm"}, MaxAttempts: 5, Expect: ledger.ExpectFailed}
		}, ledger.ExpectFailed},
		{"always fails", 3, func() spec {
			return spec{Payload: map[string]any{"mode": "fail"}, MaxAttempts: 3, Expect: ledger.ExpectFailed}
		}, ledger.ExpectFailed},
		{"fails twice", 3, func() spec {
			return spec{Payload: map[string]any{"mode": "failuntil", "until": 3}, MaxAttempts: 5, Expect: ledger.ExpectSent}
		}, ledger.ExpectSent},
	}
	keysOf := map[string][]string{}
	for _, g := range groups {
		for i := 0; i < g.n; i++ {
			before := e.seq.Load()
			must([]spec{g.spec()})
			keysOf[g.name] = append(keysOf[g.name], fmt.Sprintf("seq:%d", before+1))
		}
	}
	// The good messages come after every poison one, in id and due order.
	good := 300
	for i := 0; i < good; i += 10 {
		batch := make([]spec, 10)
		for j := range batch {
			batch[j] = okMsg(0)
		}
		must(batch)
	}
	// The poison messages fail as a burst with no success between, so the type's circuit opens,
	// as it would in an outage. Its probes, one at a time and up to 10s apart, then take the
	// rest of their attempts: settling takes minutes, not seconds.
	e.settle(4 * time.Minute)
	e.requireAlive(w)

	// No head-of-line blocking: the last good message was SENT before the first hanging
	// message was given up on (FAILED needs two leases of 2s to expire).
	var lastGood, firstHangFailed time.Time
	if err := e.db.QueryRow(`SELECT MAX(sent_at) FROM outbox_messages WHERE status='SENT' AND payload LIKE '%"mode":"ok"%'`).Scan(&lastGood); err != nil {
		t.Fatal(err)
	}
	if err := e.db.QueryRow(`SELECT MIN(failed_at) FROM outbox_messages WHERE status='FAILED' AND payload LIKE '%"hang"%'`).Scan(&firstHangFailed); err != nil {
		t.Fatal(err)
	}
	if !lastGood.Before(firstHangFailed) {
		t.Errorf("head-of-line blocking: last good message SENT at %v, after the first hanging one FAILED at %v", lastGood, firstHangFailed)
	}
	res, lines, rows := e.check(false, "undecodable, unhandled type, panic, hang 3s past a 500ms timeout, success after deadline, permanent, always failing, failing twice")
	byKey := map[string]ledger.Row{}
	for _, r := range rows {
		byKey[r.Key] = r
	}
	wantAttempts := map[string]int{"undecodable": 1, "unhandled type": 0, "panic": 3, "hang": 2, "late success": 1, "permanent": 1, "always fails": 3, "fails twice": 3}
	for _, g := range groups {
		for _, k := range keysOf[g.name] {
			r := byKey[k]
			if r.Status != string(g.status) || r.Attempts != wantAttempts[g.name] {
				t.Errorf("%s (%s): status %s attempts %d, want %s after %d (last_error %q)", g.name, k, r.Status, r.Attempts, g.status, wantAttempts[g.name], r.LastError)
			}
		}
	}
	for _, k := range keysOf["panic"] {
		if !strings.Contains(byKey[k].LastError, "panic") {
			t.Errorf("panic message %s: last_error %q does not say it panicked", k, byKey[k].LastError)
		}
	}
	if n := countIncidents(lines, "handler_hung"); n < 2 {
		t.Errorf("handler_hung incidents: %d, want at least one per hanging message (2)", n)
	}
	report(fmt.Sprintf("poison: %d poison + %d good; handler_hung incidents %d; last good SENT %v before first hang FAILED",
		len(rows)-good, good, countIncidents(lines, "handler_hung"), firstHangFailed.Sub(lastGood).Round(time.Millisecond)))
	_ = res
}
