//go:build reliability

// Package reliability is the fault suite: real worker processes (cmd/relworker)
// against a server of its own (MariaDB 10.11, MariaDB 11.8 or MySQL 9.7: OUTBOX_REL_SERVER,
// default mariadb-10.11), which it stops, restarts and kills. Run it with scripts/reliability
// [--server KIND]; it is build-tagged so `go test ./...` never runs it beside the other
// packages. OUTBOX_SOAK=1 runs the long variant.
package reliability

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
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
