//go:build reliability

package server

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/outboxgen/outboxgen/internal/testdb"
	"github.com/outboxgen/outboxgen/internal/testutil"
)

// TestLifecycle, on the server kind OUTBOX_REL_SERVER names: data committed before a clean
// stop and before a kill -9 survives; the kill -9 hits the server process itself (not a
// wrapper around it); KILL and KILL QUERY of another session work; the client pool reconnects
// after each restart, on the same port.
func TestLifecycle(t *testing.T) {
	kind, err := KindFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*kind.StartTimeout())
	defer cancel()
	s, err := New(ctx, kind)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("server: %s, pid %d, datadir %s", s, s.Pid(), s.Dir)
	defer func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	}()
	if _, err := s.Admin().ExecContext(ctx, "CREATE DATABASE lc"); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("mysql", s.DSN("outbox", "lc", ""))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	mustExec := func(q string) {
		t.Helper()
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	count := func() int {
		t.Helper()
		var n int
		var err error
		for i := 0; i < 3; i++ { // the first query after a restart may hit a dead pooled conn
			if err = db.QueryRowContext(ctx, "SELECT COUNT(*) FROM t").Scan(&n); err == nil {
				return n
			}
		}
		t.Fatalf("count: %v", err)
		return 0
	}
	mustExec("CREATE TABLE t (id INT PRIMARY KEY) ENGINE=InnoDB")
	mustExec("INSERT INTO t VALUES (1)")
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if s.Running() {
		t.Fatal("Running after Stop")
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 1 {
		t.Fatalf("after clean restart: %d rows, want 1", n)
	}
	mustExec("INSERT INTO t VALUES (2)")
	// The process Kill signals is the server: its pid file names it and /proc says what it runs.
	pid := s.Pid()
	comm, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm"))
	if err != nil {
		t.Fatal(err)
	}
	if c := strings.TrimSpace(string(comm)); c != "mysqld" && c != "mariadbd" {
		t.Fatalf("pid %d runs %q, want the server itself (mysqld or mariadbd)", pid, c)
	}
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("server pid %d after Kill: %v, want no such process", pid, err)
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 2 {
		t.Fatalf("after kill -9 and restart: %d rows, want 2 (a committed write reached the OS before the kill)", n)
	}

	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var id int64
	if err := conn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
		t.Fatal(err)
	}
	// KILL QUERY on a sleeping query ends the query, not the session.
	slept := make(chan error, 1)
	go func() { slept <- conn.QueryRowContext(ctx, "SELECT SLEEP(30)").Scan(new(int)) }()
	testutil.Eventually(t, 10*time.Second, "SELECT SLEEP(30) in the process list", func() bool {
		// Not information_schema.PROCESSLIST: on MySQL its reads fail while any session runs a
		// statement holding an emoji (see testdb.Sessions).
		list, err := testdb.Sessions(ctx, s.Admin())
		if err != nil {
			t.Fatal(err)
		}
		for _, ps := range list {
			if ps.ID == id && bytes.HasPrefix(ps.Info, []byte("SELECT SLEEP")) {
				return true
			}
		}
		return false
	})
	if err := s.KillConn(ctx, id, true); err != nil {
		t.Fatal(err)
	}
	select {
	case <-slept: // SLEEP returns 1 (MariaDB, MySQL) or the query fails: either way it ended
	case <-time.After(10 * time.Second):
		t.Fatal("KILL QUERY did not end SELECT SLEEP(30)")
	}
	var again int64
	if err := conn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&again); err != nil || again != id {
		t.Fatalf("after KILL QUERY: connection %d, err %v; want the same session %d", again, err, id)
	}
	if err := s.KillConn(ctx, id, false); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRowContext(ctx, "SELECT 1").Scan(new(int)); err == nil {
		t.Fatal("query on a KILLed session succeeded; want an error")
	}
}
