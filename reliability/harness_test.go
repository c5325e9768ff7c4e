//go:build reliability

// Package reliability is the fault suite (issue 7): real worker processes (cmd/relworker)
// against a server of its own (MariaDB 10.11, MariaDB 11.8 or MySQL 9.7: OUTBOX_REL_SERVER,
// default mariadb-10.11), which it stops, restarts and kills. Run it with scripts/reliability
// [--server KIND]; it is build-tagged so `go test ./...` never runs it beside the other
// packages. OUTBOX_SOAK=1 runs the long variant.
package reliability

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/outboxgen/outboxgen/reliability/internal/ledger"
	"github.com/outboxgen/outboxgen/reliability/internal/server"
	"github.com/outboxgen/outboxgen/runtime/outbox"
)

const (
	eventType = "rel.msg"    // handled by relworker
	nobody    = "rel.nobody" // handled by no worker: must stay PENDING, never claimed
)

// orderedTypes are handled by relworker -ordered (its OrderedTypes): the ordering scenarios'
// two event types, sharing their keys' order.
var orderedTypes = []string{"rel.ord.placed", "rel.ord.paid"}

var (
	srv       *server.Server
	binDir    string
	workerBin string
	soak      = os.Getenv("OUTBOX_SOAK") == "1"
)

// buildWorker builds cmd/relworker into binDir/name with the given build tags.
func buildWorker(name, tags string) (string, error) {
	path := filepath.Join(binDir, name)
	args := []string{"build", "-tags", tags, "-o", path}
	if os.Getenv("OUTBOX_REL_RACE") == "1" {
		args = append(args, "-race")
	}
	out, err := exec.Command("go", append(args, "./cmd/relworker")...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("build relworker (tags %q): %v\n%s", tags, err, out)
	}
	return path, nil
}

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	tmp, err := os.MkdirTemp("", "outboxgen-rel-bin.")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	binDir = tmp
	tags := ""
	if os.Getenv("OUTBOX_REL_STUB") == "1" {
		tags = "relstub" // the harness's own stand-in worker, not the runtime's
	}
	workerBin, err = buildWorker("relworker", tags)
	if err != nil {
		fmt.Fprintln(os.Stderr, "reliability:", err)
		return 1
	}
	kind, err := server.KindFromEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, "reliability:", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*kind.StartTimeout())
	srv, err = server.New(ctx, kind)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "reliability:", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "reliability: own server %s, pid %d (datadir %s)\n", srv, srv.Pid(), srv.Dir)
	// Every report line says which server its result came from.
	reportTag = fmt.Sprintf("[%s %s] ", srv.Kind, srv.Version)
	report(fmt.Sprintf("server %s, datadir %s", srv, srv.Dir))
	code := m.Run()
	if err := srv.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "reliability: close server:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// env is one scenario: its own database, its ledger directory, its enqueue record and its
// worker processes.
type env struct {
	t      *testing.T
	name   string
	dbName string
	db     *sql.DB // the test process's pool (user outbox)
	dir    string

	mu    sync.Mutex
	enq   []ledger.Enqueued
	procs []*proc

	seq        atomic.Int64
	enqErrors  atomic.Int64
	incarnated map[string]int
	killed     map[string]bool  // incarnations the suite killed with SIGKILL
	killedAt   map[string]int64 // when each of them was gone (UnixNano, after the kill was reaped)

	// The ordering scenarios (ordering_test.go): deadlocks (1213) the enqueuers hit, and
	// sabotage: enqueue without outbox.Message.OrderingKey while recording the key and the
	// commit order as usual (the control that the order checks can fail).
	deadlocks atomic.Int64
	sabotage  bool

	bin     string   // worker binary; workerBin unless a test swaps it
	procEnv []string // extra environment of the worker processes
}

func newEnv(t *testing.T, name string) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dbName := "rel_" + name
	if _, err := srv.Admin().ExecContext(ctx, "CREATE DATABASE "+dbName); err != nil {
		t.Fatalf("create database: %v", err)
	}
	db, err := sql.Open("mysql", srv.DSN("outbox", dbName, ""))
	if err != nil {
		t.Fatal(err)
	}
	if err := outbox.Migrate(ctx, db); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	for _, stmt := range auditDDL {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("audit trigger: %v\n%s", err, stmt)
		}
	}
	dir := t.TempDir()
	e := &env{t: t, name: name, dbName: dbName, db: db, dir: dir, incarnated: map[string]int{}, killed: map[string]bool{}, killedAt: map[string]int64{}, bin: workerBin}
	t.Cleanup(func() {
		e.stopAll(false)
		db.Close()
		if t.Failed() {
			e.dumpLogs()
		}
		if _, err := srv.Admin().Exec("DROP DATABASE IF EXISTS " + dbName); err != nil {
			t.Logf("drop database %s: %v", dbName, err)
		}
	})
	return e
}

// auditDDL installs the suite's audit (in the scenario's database only, never in schema.sql):
// a trigger records every committed change of a row's status, claim_token or sent_at, in the
// same transaction as the change, with the database clock at the statement's start.
var auditDDL = []string{
	`CREATE TABLE rel_history (
		seq        BIGINT      NOT NULL AUTO_INCREMENT PRIMARY KEY,
		id         BIGINT      NOT NULL,
		old_status VARCHAR(16) NOT NULL,
		new_status VARCHAR(16) NOT NULL,
		old_token  VARCHAR(32) NULL,
		new_token  VARCHAR(32) NULL,
		at         DATETIME(6) NOT NULL
	) ENGINE = InnoDB`,
	`CREATE TRIGGER rel_audit AFTER UPDATE ON outbox_messages FOR EACH ROW
	IF NOT (OLD.status <=> NEW.status) OR NOT (OLD.claim_token <=> NEW.claim_token) OR NOT (OLD.sent_at <=> NEW.sent_at) THEN
		INSERT INTO rel_history (id, old_status, new_status, old_token, new_token, at)
		VALUES (OLD.id, OLD.status, NEW.status, OLD.claim_token, NEW.claim_token, UTC_TIMESTAMP(6));
	END IF`,
}

// history reads the audit trail.
func (e *env) history() []ledger.Transition {
	e.t.Helper()
	rs, err := e.db.Query(`SELECT seq, id, old_status, new_status, COALESCE(old_token,''), COALESCE(new_token,''), at FROM rel_history ORDER BY seq`)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rs.Close()
	var out []ledger.Transition
	for rs.Next() {
		var h ledger.Transition
		if err := rs.Scan(&h.Seq, &h.ID, &h.OldStatus, &h.NewStatus, &h.OldToken, &h.NewToken, &h.At); err != nil {
			e.t.Fatal(err)
		}
		out = append(out, h)
	}
	if err := rs.Err(); err != nil {
		e.t.Fatal(err)
	}
	return out
}

// spec is one message to enqueue.
type spec struct {
	Payload     any // marshalled; a json.RawMessage is used as is
	EventType   string
	MaxAttempts int
	Expect      ledger.Expect
	// OrderingKey makes the message ordered (outbox.Message.OrderingKey); enqueueTx then also
	// records its place in the key's commit order (see commitPositions).
	OrderingKey string
}

func okMsg(ms int) spec {
	return spec{Payload: map[string]any{"mode": "ok", "ms": ms}, Expect: ledger.ExpectSent, MaxAttempts: 100}
}

// enqueueTx enqueues msgs in one transaction, committed or rolled back, and records each
// message's fate: Committed when Commit returned nil, Ambiguous when Commit failed (the server
// may have committed before the connection died), RolledBack when rolled back on purpose,
// Aborted on an error before Commit. Its own transaction rather
// than InTx so that the commit error is told apart from the others exactly.
func (e *env) enqueueTx(ctx context.Context, msgs []spec, rollback bool) error {
	keys := make([]string, len(msgs))
	recs := make([]ledger.Enqueued, len(msgs))
	for i, m := range msgs {
		seq := e.seq.Add(1)
		keys[i] = fmt.Sprintf("seq:%d", seq)
		if m.Expect == "" {
			m.Expect = ledger.ExpectSent
		}
		recs[i] = ledger.Enqueued{Key: keys[i], State: ledger.RolledBack, Expect: m.Expect, OrderingKey: m.OrderingKey}
	}
	record := func(s ledger.State) {
		e.mu.Lock()
		for i := range recs {
			recs[i].State = s
			e.enq = append(e.enq, recs[i])
		}
		e.mu.Unlock()
	}
	tx, err := e.db.BeginTx(ctx, nil)
	if err != nil {
		record(ledger.Aborted) // nothing was inserted
		e.enqErrors.Add(1)
		return err
	}
	for i, m := range msgs {
		var payload json.RawMessage
		seq := strings.TrimPrefix(keys[i], "seq:")
		switch p := m.Payload.(type) {
		case json.RawMessage:
			payload = p
		case map[string]any:
			cp := map[string]any{}
			for k, v := range p {
				cp[k] = v
			}
			cp["seq"] = json.Number(seq)
			payload, err = json.Marshal(cp)
			if err != nil {
				e.t.Fatal(err)
			}
		default:
			e.t.Fatalf("spec payload %T", m.Payload)
		}
		et := m.EventType
		if et == "" {
			et = eventType
		}
		okey := m.OrderingKey
		if e.sabotage {
			okey = "" // the control: the runtime is not told the key
		}
		if _, err := outbox.Enqueue(ctx, tx, outbox.Message{EventType: et, Payload: payload,
			IdempotencyKey: keys[i], MaxAttempts: m.MaxAttempts, OrderingKey: okey}); err != nil {
			rbErr := tx.Rollback()
			record(ledger.Aborted)
			e.enqErrors.Add(1)
			if strings.Contains(err.Error(), "1213") {
				e.deadlocks.Add(1)
			}
			return errors.Join(err, rbErr)
		}
	}
	if err := e.commitPositions(ctx, tx, msgs, recs); err != nil {
		rbErr := tx.Rollback()
		record(ledger.Aborted)
		e.enqErrors.Add(1)
		return errors.Join(err, rbErr)
	}
	if rollback {
		if err := tx.Rollback(); err != nil {
			// The transaction never committed whatever Rollback says.
			e.enqErrors.Add(1)
		}
		record(ledger.RolledBack)
		return nil
	}
	if err := tx.Commit(); err != nil {
		record(ledger.Ambiguous)
		e.enqErrors.Add(1)
		return err
	}
	record(ledger.Committed)
	return nil
}

// commitPositions records, for the ordered messages of a transaction, their place in their
// key's commit order (Enqueued.Index): after the enqueues, for each key of the transaction in
// key order, it reads the key's business counter (rel_biz, see setupOrdering) under a row lock
// held until the transaction ends and adds the transaction's messages of that key to it.
// Whatever else serialises the key, that lock makes the counter the commit order: a
// transaction reads what the ones committed before it added, and a rolled-back one adds
// nothing. Within a transaction the messages keep their enqueue order.
func (e *env) commitPositions(ctx context.Context, tx *sql.Tx, msgs []spec, recs []ledger.Enqueued) error {
	count := map[string]int64{}
	for _, m := range msgs {
		if m.OrderingKey != "" {
			count[m.OrderingKey]++
		}
	}
	if len(count) == 0 {
		return nil
	}
	keys := make([]string, 0, len(count))
	for k := range count {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	base := map[string]int64{}
	for _, k := range keys {
		var n int64
		if err := tx.QueryRowContext(ctx, "SELECT n FROM rel_biz WHERE k = ? FOR UPDATE", k).Scan(&n); err != nil {
			return fmt.Errorf("business row %s: %w", k, err)
		}
		if _, err := tx.ExecContext(ctx, "UPDATE rel_biz SET n = n + ? WHERE k = ?", count[k], k); err != nil {
			return fmt.Errorf("business row %s: %w", k, err)
		}
		base[k] = n
	}
	for i, m := range msgs {
		if k := m.OrderingKey; k != "" {
			base[k]++
			recs[i].Index = base[k]
		}
	}
	return nil
}

// load runs n enqueuer goroutines until ctx is done: each transaction holds 1-3 messages from
// gen, and one in rollbackEvery transactions is rolled back. Errors are counted and the
// enqueuers keep going (a restarting server is expected to fail some of them).
func (e *env) load(ctx context.Context, n int, pause time.Duration, rollbackEvery int, gen func(r *rand.Rand) spec) *sync.WaitGroup {
	var wg sync.WaitGroup
	for g := 0; g < n; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), uint64(time.Now().UnixNano())))
			for ctx.Err() == nil {
				k := 1 + r.IntN(3)
				msgs := make([]spec, k)
				for i := range msgs {
					msgs[i] = gen(r)
				}
				// A short per-transaction deadline: a transaction stuck on a dead server fails
				// and the enqueuer moves on, as an application request would.
				tctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_ = e.enqueueTx(tctx, msgs, rollbackEvery > 0 && r.IntN(rollbackEvery) == 0) // counted in enqErrors
				cancel()
				if pause > 0 {
					time.Sleep(pause)
				}
			}
		}(g)
	}
	return &wg
}

// proc is one relworker process.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	log  *os.File
}

type workerOpts struct {
	addr  string // "" = the server directly; else a proxy address
	flags []string
}

// startWorker starts a relworker incarnation of role (w1, w2...): its ledger file and log are
// named role.N so a restarted process never writes into its predecessor's file.
func (e *env) startWorker(role string, o workerOpts) *proc {
	e.t.Helper()
	e.mu.Lock()
	e.incarnated[role]++
	name := fmt.Sprintf("%s.%d", role, e.incarnated[role])
	e.mu.Unlock()
	logf, err := os.Create(filepath.Join(e.dir, name+".log"))
	if err != nil {
		e.t.Fatal(err)
	}
	args := append([]string{
		"-dsn", srv.DSN("relworker", e.dbName, o.addr),
		"-ledger", filepath.Join(e.dir, name+".jsonl"),
		"-proc", name,
	}, o.flags...)
	cmd := exec.Command(e.bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), e.procEnv...)
	if err := cmd.Start(); err != nil {
		e.t.Fatalf("start %s: %v", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{}), log: logf}
	go func() {
		p.err = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	e.mu.Lock()
	e.procs = append(e.procs, p)
	e.mu.Unlock()
	return p
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// kill9 is SIGKILL: no shutdown, no deferred code; in-flight claims stay PROCESSING.
// killMidDispatch kills role's live worker with kill -9 once its ledger shows a call in flight
// (inFlight > 0, waiting up to 3s: a fresh incarnation needs a moment), starts a new
// incarnation of the role in its place, and returns the killed worker's name.
func (e *env) killMidDispatch(live map[string]*proc, role string, opts workerOpts, inFlight func(proc string) int) string {
	e.requireAlive(live[role])
	for wait := time.Now(); time.Since(wait) < 3*time.Second && inFlight(live[role].name) == 0; {
		time.Sleep(5 * time.Millisecond)
	}
	e.kill9(live[role])
	name := live[role].name
	live[role] = e.startWorker(role, opts)
	return name
}

func (e *env) kill9(p *proc) {
	e.mu.Lock()
	e.killed[p.name] = true
	e.mu.Unlock()
	p.kill9()
	e.mu.Lock()
	e.killedAt[p.name] = time.Now().UnixNano()
	e.mu.Unlock()
}

func (p *proc) kill9() {
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		panic(err)
	}
	<-p.done
}

// term asks for a graceful stop and returns an error if the process does not exit within
// wait or exits with a failure.
func (p *proc) term(wait time.Duration) error {
	if p.exited() {
		return fmt.Errorf("%s had already exited: %v", p.name, p.err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-p.done:
		if p.err != nil {
			return fmt.Errorf("%s exited after SIGTERM: %v", p.name, p.err)
		}
		return nil
	case <-time.After(wait):
		p.kill9()
		return fmt.Errorf("%s did not exit within %v of SIGTERM (killed)", p.name, wait)
	}
}

// stopAll stops every live process; with check, a process that died on its own or does not
// stop cleanly fails the test.
func (e *env) stopAll(check bool) {
	e.mu.Lock()
	procs := append([]*proc(nil), e.procs...)
	e.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range procs {
		if p.exited() {
			continue
		}
		wg.Add(1)
		go func(p *proc) {
			defer wg.Done()
			if err := p.term(20 * time.Second); err != nil && check {
				e.t.Errorf("stop worker: %v", err)
			}
		}(p)
	}
	wg.Wait()
}

// requireAlive fails the test if a process exited on its own (not killed by the suite).
func (e *env) requireAlive(ps ...*proc) {
	e.t.Helper()
	for _, p := range ps {
		if p.exited() {
			e.t.Fatalf("worker %s exited on its own: %v (log below)\n%s", p.name, p.err, tail(filepath.Join(e.dir, p.name+".log"), 30))
		}
	}
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func (e *env) dumpLogs() {
	files, _ := filepath.Glob(filepath.Join(e.dir, "*.log"))
	for _, f := range files {
		e.t.Logf("--- %s (tail)\n%s", filepath.Base(f), tail(f, 15))
	}
}

// countLogLines counts lines of every worker log that contain s (e.g. error-level lines).
func (e *env) countLogLines(s string) int {
	files, _ := filepath.Glob(filepath.Join(e.dir, "*.log"))
	n := 0
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			e.t.Error(err)
			continue
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if strings.Contains(sc.Text(), s) {
				n++
			}
		}
		fh.Close()
	}
	return n
}

var refusedRE = regexp.MustCompile(`message_id=(\d+) claim_token=(\w+)`)

// fenceRefusals reads the workers' logs for result writes refused by the fence, keyed
// "id/token". It relies on the runtime's log text, so it is evidence, never a pass condition.
func (e *env) fenceRefusals() map[string]bool {
	out := map[string]bool{}
	files, _ := filepath.Glob(filepath.Join(e.dir, "*.log"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			e.t.Error(err)
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if !strings.Contains(line, "refused by the fence") {
				continue
			}
			if m := refusedRE.FindStringSubmatch(line); m != nil {
				out[m[1]+"/"+m[2]] = true
			}
		}
	}
	return out
}

// settle waits until no row of a handled type is PENDING or PROCESSING (every message reached
// SENT or FAILED), or fails after timeout with the counts.
func (e *env) settle(timeout time.Duration) {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	var pending, processing int
	lastLog := time.Now()
	for {
		if time.Since(lastLog) > 10*time.Second {
			e.t.Logf("settling: pending=%d processing=%d", pending, processing)
			lastLog = time.Now()
		}
		err := e.db.QueryRow(`SELECT CAST(COALESCE(SUM(status='PENDING'),0) AS SIGNED), CAST(COALESCE(SUM(status='PROCESSING'),0) AS SIGNED)
			FROM outbox_messages WHERE event_type IN (?, ?, ?)`, eventType, orderedTypes[0], orderedTypes[1]).Scan(&pending, &processing)
		if err == nil && pending == 0 && processing == 0 {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("not settled after %v: pending=%d processing=%d (last error %v)", timeout, pending, processing, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// rows reads every row's final state.
func (e *env) rows() []ledger.Row {
	e.t.Helper()
	rs, err := e.db.Query(`SELECT id, idempotency_key, event_type, status, attempts, COALESCE(claim_token,''), COALESCE(last_error,''),
		COALESCE(ordering_key,''), COALESCE(ordering_seq,0)
		FROM outbox_messages ORDER BY id`)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rs.Close()
	var out []ledger.Row
	for rs.Next() {
		var r ledger.Row
		if err := rs.Scan(&r.ID, &r.Key, &r.EventType, &r.Status, &r.Attempts, &r.ClaimToken, &r.LastError, &r.OrderingKey, &r.OrderingSeq); err != nil {
			e.t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rs.Err(); err != nil {
		e.t.Fatal(err)
	}
	return out
}

func (e *env) lines() []ledger.Line {
	e.t.Helper()
	ls, torn, err := ledger.ReadDir(e.dir)
	if err != nil {
		e.t.Fatal(err)
	}
	if torn > 0 {
		e.t.Errorf("%d torn ledger line(s): a line must be one write", torn)
	}
	return ls
}

// verify stops the workers and runs the ledger and history checks; it reports the counts
// (faults describes what was injected) but fails nothing.
func (e *env) verify(allowDup bool, faults string) (ledger.Result, []ledger.Line, []ledger.Row) {
	e.t.Helper()
	e.stopAll(true)
	rows := e.rows()
	lines := e.lines()
	e.mu.Lock()
	enq := append([]ledger.Enqueued(nil), e.enq...)
	killed := e.killed
	e.mu.Unlock()
	// Messages the worker processes enqueued themselves (relworker -produce-rate) are recorded
	// in their ledgers, not in e.enq.
	produced, _, producedProblems := ledger.Produced(lines)
	enq = append(enq, produced...)
	res := ledger.Check(enq, rows, lines, allowDup)
	res.Problems = append(res.Problems, producedProblems...)
	ledgerProblems := len(res.Problems)
	ledger.CheckHistory(&res, e.history(), lines, time.Millisecond)
	historyProblems := len(res.Problems) - ledgerProblems
	// outbox.Stats, what operators read, must agree with the rows after the faults.
	st, err := outbox.Stats(context.Background(), e.db)
	if err != nil {
		e.t.Errorf("Stats: %v", err)
	} else if st.Processing != 0 || st.Stuck != 0 || st.Stale != 0 || st.Failed != int64(res.Failed) || st.Pending != int64(res.Pending) {
		res.Problems = append(res.Problems, fmt.Sprintf("outbox.Stats disagrees with the rows: %+v, rows say failed=%d pending=%d processing=0", st, res.Failed, res.Pending))
	}
	// Evidence per duplicate beyond the ledger: the worker logs each result write its fence
	// refused (the row had been reclaimed and belonged to a newer claim), and the suite knows
	// which processes it killed.
	refused := e.fenceRefusals()
	var byFence, byKill, other int
	for _, d := range res.Dups {
		switch {
		case killed[d.Proc]:
			byKill++
		case refused[fmt.Sprintf("%d/%s", d.ID, d.Token)]:
			byFence++
		default:
			other++
		}
	}
	summary := fmt.Sprintf("%s: %s (ledger %d, history %d) enqueue_errors=%d fence_refusals_logged=%d; duplicates by cause: process killed %d, write refused by the fence %d, write failed %d | faults: %s",
		e.name, res, ledgerProblems, historyProblems, e.enqErrors.Load(), len(refused), byKill, byFence, other, faults)
	e.t.Log(summary)
	report(summary)
	return res, lines, rows
}

// check is verify, failing the test on any problem.
func (e *env) check(allowDup bool, faults string) (ledger.Result, []ledger.Line, []ledger.Row) {
	e.t.Helper()
	res, lines, rows := e.verify(allowDup, faults)
	if len(res.Problems) > 0 {
		e.t.Errorf("ledger check found %d problem(s):\n%s", len(res.Problems), res.Summary(30))
	}
	if res.Committed == 0 {
		e.t.Errorf("no committed message: the scenario proved nothing")
	}
	return res, lines, rows
}

var (
	reportMu  sync.Mutex
	reportTag string // "[kind version] ", set by TestMain
)

// report appends a line to $OUTBOX_REL_REPORT (scripts/reliability prints it at the end),
// prefixed with the server it ran on.
func report(line string) {
	line = reportTag + line
	path := os.Getenv("OUTBOX_REL_REPORT")
	if path == "" {
		return
	}
	reportMu.Lock()
	defer reportMu.Unlock()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		return
	}
	defer f.Close()
	if _, err := fmt.Fprintln(f, line); err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
	}
}

// inflightAtKill counts, per killed incarnation, calls that had begun and not finished: the
// kill landed mid-dispatch.
func inflightByProc(lines []ledger.Line) map[string]int {
	open := map[string]map[string]bool{}
	for _, l := range lines {
		k := fmt.Sprintf("%d/%s", l.ID, l.Token)
		switch l.T {
		case ledger.KindCall:
			if open[l.Proc] == nil {
				open[l.Proc] = map[string]bool{}
			}
			open[l.Proc][k] = true
		case ledger.KindDone:
			delete(open[l.Proc], k)
		}
	}
	out := map[string]int{}
	for p, m := range open {
		out[p] = len(m)
	}
	return out
}

// openCalls counts the calls in proc's ledger that have begun and not finished.
func (e *env) openCalls(proc string) int {
	ls, _, err := ledger.ReadFile(filepath.Join(e.dir, proc+".jsonl"))
	if err != nil {
		return 0 // not written yet
	}
	return inflightByProc(ls)[proc]
}

// waitLine waits until proc's ledger holds a line of kind, or fails the test after timeout.
func (e *env) waitLine(proc, kind string, timeout time.Duration) {
	e.t.Helper()
	for deadline := time.Now().Add(timeout); ; time.Sleep(10 * time.Millisecond) {
		ls, _, err := ledger.ReadFile(filepath.Join(e.dir, proc+".jsonl"))
		if err == nil {
			for _, l := range ls {
				if l.T == kind {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: no %q line in its ledger after %v (log below)\n%s", proc, kind, timeout, tail(filepath.Join(e.dir, proc+".log"), 30))
		}
	}
}

// maxMem returns the largest heap-in-use and RSS samples per role prefix.
func maxMem(lines []ledger.Line) (heap, rss uint64) {
	for _, l := range lines {
		if l.T != ledger.KindMem {
			continue
		}
		heap = max(heap, l.Heap)
		rss = max(rss, l.RSS)
	}
	return heap, rss
}

func countIncidents(lines []ledger.Line, kind string) int {
	n := 0
	for _, l := range lines {
		if l.T == ledger.KindIncident && l.Kind == kind {
			n++
		}
	}
	return n
}

// baseFlags are relworker settings shared by the scenarios: short leases so a killed worker's
// rows come back within seconds.
func baseFlags(extra ...string) []string {
	return append([]string{"-stale", "2s", "-timeout", "500ms", "-poll", "100ms", "-shutdown", "3s"}, extra...)
}
