//go:build reliability

package reliability

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/internal/testdb"
)

// Scenario 3: KILL the workers' connections from the server side at random, aiming at the
// claim, the result writes and the reclaim. A row lock held briefly by the test on PROCESSING
// rows makes the result writes and the reclaim wait, so they can be caught in the process list.
func TestKillConnections(t *testing.T) {
	e := newEnv(t, "kill_conns")
	flags := baseFlags("-concurrency", "8", "-batch", "8")
	ws := []*proc{
		e.startWorker("w1", workerOpts{flags: flags}),
		e.startWorker("w2", workerOpts{flags: flags}),
		e.startWorker("w3", workerOpts{flags: flags}),
	}
	ctx, stop := context.WithCancel(context.Background())
	wg := e.load(ctx, 4, 5*time.Millisecond, 8, mixedOK)

	dur := 12 * time.Second
	if soak {
		dur = 2 * time.Minute
	}
	// The kills go on past dur until each statement aimed at was killed at least once, up to
	// three times dur. Which statements are in flight when the killer looks is chance: a run
	// whose claims were killed again and again backs off its claims and writes no result for a
	// while, and a fixed window can end before a result write was caught.
	kctx, kstop := context.WithTimeout(context.Background(), 3*dur)
	defer kstop()
	var hits sync.Map // category -> *atomic.Int64
	hit := func(cat string) {
		v, _ := hits.LoadOrStore(cat, new(atomic.Int64))
		v.(*atomic.Int64).Add(1)
	}
	killed := func(cat string) int64 {
		var n int64
		for _, k := range []string{cat, cat + "(query)"} {
			if v, ok := hits.Load(k); ok {
				n += v.(*atomic.Int64).Load()
			}
		}
		return n
	}
	aimedAt := []string{"claim", "record", "reclaim"}
	began := time.Now()
	var kwg sync.WaitGroup
	kwg.Add(3)
	go func() { defer kwg.Done(); e.killer(kctx, hit) }()
	go func() { defer kwg.Done(); e.blocker(kctx) }()
	go func() {
		defer kwg.Done()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-kctx.Done():
				return
			case <-tick.C:
			}
			reached := time.Since(began) >= dur
			for _, cat := range aimedAt {
				reached = reached && killed(cat) > 0
			}
			if reached {
				kstop()
				return
			}
		}
	}()
	kwg.Wait()
	t.Logf("kills went on for %.1fs", time.Since(began).Seconds())
	stop()
	wg.Wait()
	e.requireAlive(ws...)
	// A KILL that lands while a session loads the audit trigger can leave MariaDB's cached copy
	// of the table marked with an unparseable trigger: every later write through that copy fails
	// with 1064 "Trigger 'rel_audit' has an error in its body", after the kills have stopped.
	// The trigger is the suite's, not outboxgen's, so the suite drops those copies.
	if _, err := e.db.Exec("FLUSH TABLES outbox_messages"); err != nil {
		t.Fatalf("flush the table cache after the kills: %v", err)
	}
	e.settle(settleTimeout)
	counts := map[string]int64{}
	hits.Range(func(k, v any) bool { counts[k.(string)] = v.(*atomic.Int64).Load(); return true })
	res, _, _ := e.check(true, fmt.Sprintf("KILLs by statement %v", counts))
	t.Logf("server-side KILLs by statement: %v", counts)
	otherMu.Lock()
	t.Logf("sample of unnamed statements killed: %q", otherSample)
	otherMu.Unlock()
	for _, cat := range aimedAt {
		if counts[cat]+counts[cat+"(query)"] == 0 {
			t.Errorf("no %s statement was killed: the scenario did not reach it (kills %v)", cat, counts)
		}
	}
	_ = res
}

// category names a worker statement from its text in the process list.
func category(info string) string {
	// sqlc's statements start with their "-- name: ..." comment line.
	var lines []string
	for _, l := range strings.Split(info, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "--") {
			lines = append(lines, l)
		}
	}
	s := strings.ToUpper(strings.Join(strings.Fields(strings.Join(lines, " ")), ""))
	switch {
	case s == "":
		return "idle"
	case strings.Contains(s, "SKIPLOCKED"), strings.Contains(s, "STATUS='PROCESSING',ATTEMPTS"):
		return "claim"
	case strings.HasPrefix(s, "UPDATE") && strings.Contains(s, "RECLAIM_AFTER<"):
		return "reclaim"
	case strings.HasPrefix(s, "UPDATE") && strings.Contains(s, "CLAIM_TOKEN="):
		return "record"
	case strings.HasPrefix(s, "COMMIT"):
		return "commit"
	default:
		otherMu.Lock()
		if len(otherSample) < 5 {
			otherSample = append(otherSample, info)
		}
		otherMu.Unlock()
		return "other"
	}
}

var (
	otherMu     sync.Mutex
	otherSample []string // statements the killer could not name, logged for the report
)

// killer KILLs (or KILL QUERYs) one of the relworker sessions every few milliseconds,
// preferring one with a statement in flight.
func (e *env) killer(ctx context.Context, hit func(string)) {
	r := rand.New(rand.NewPCG(3, uint64(time.Now().UnixNano())))
	for ctx.Err() == nil {
		pace(ctx, time.Duration(2+r.IntN(8))*time.Millisecond)
		// Not information_schema.PROCESSLIST: on MySQL its reads fail while any session runs a
		// statement holding an emoji (see testdb.Sessions).
		list, err := testdb.Sessions(ctx, srv.Admin())
		if err != nil {
			if ctx.Err() == nil {
				e.t.Errorf("killer: processlist: %v", err)
			}
			return
		}
		type sess struct {
			id  int64
			cat string
		}
		var busy, idle []sess
		for _, ps := range list {
			if ps.User != "relworker" || ps.DB != e.dbName {
				continue
			}
			s := sess{id: ps.ID, cat: category(string(ps.Info))}
			if s.cat == "idle" {
				idle = append(idle, s)
			} else {
				busy = append(busy, s)
			}
		}
		var victim sess
		switch {
		case len(busy) > 0:
			victim = busy[r.IntN(len(busy))]
		case len(idle) > 0 && r.IntN(10) == 0:
			victim = idle[r.IntN(len(idle))]
		default:
			continue
		}
		queryOnly := r.IntN(3) == 0
		if err := srv.KillConn(ctx, victim.id, queryOnly); err != nil {
			// The session may have ended between the list and the KILL (1094 unknown thread).
			if !strings.Contains(err.Error(), "1094") && ctx.Err() == nil {
				e.t.Errorf("killer: KILL %d: %v", victim.id, err)
			}
			continue
		}
		if queryOnly {
			hit(victim.cat + "(query)")
		} else {
			hit(victim.cat)
		}
	}
}

// blocker holds row locks on a few PROCESSING rows for a moment, again and again, so the
// workers' fenced result writes and the reclaim wait on them and show up in the process list.
func (e *env) blocker(ctx context.Context) {
	r := rand.New(rand.NewPCG(4, uint64(time.Now().UnixNano())))
	for ctx.Err() == nil {
		tx, err := e.db.BeginTx(ctx, nil)
		if err != nil {
			if ctx.Err() == nil {
				e.t.Errorf("blocker: begin: %v", err)
			}
			return
		}
		rs, err := tx.QueryContext(ctx, `SELECT id FROM outbox_messages WHERE status = 'PROCESSING'
			ORDER BY reclaim_after LIMIT 4 FOR UPDATE`)
		if err == nil {
			for rs.Next() {
			}
			err = rs.Close()
		}
		if err == nil {
			select {
			case <-ctx.Done():
			case <-time.After(time.Duration(100+r.IntN(200)) * time.Millisecond):
			}
		}
		if rbErr := tx.Rollback(); rbErr != nil && ctx.Err() == nil && err == nil {
			e.t.Errorf("blocker: rollback: %v", rbErr)
		}
		if err != nil && ctx.Err() == nil && !strings.Contains(err.Error(), "1205") && !strings.Contains(err.Error(), "1213") {
			e.t.Errorf("blocker: %v", err)
			return
		}
		pace(ctx, time.Duration(50+r.IntN(100))*time.Millisecond)
	}
}
