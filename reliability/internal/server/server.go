// Package server controls a throwaway MariaDB for the fault suite: install a datadir in a temp
// directory, start mariadbd on it (the flags scripts/mariadb.sh uses), stop it cleanly, start it
// again on the same datadir and port, kill -9 it, and KILL other sessions through an admin
// connection. It never touches the shared dev server: every Server has its own directory,
// socket and port.
package server

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Server is one throwaway MariaDB. Methods are not safe for concurrent use, except Admin,
// KillConn and DSN.
type Server struct {
	// Dir holds data/, the socket, the pid file and err.log.
	Dir string
	// Port is fixed for the server's life, so clients reconnect to the same address after Start.
	Port int
	// FlushAtCommit is innodb_flush_log_at_trx_commit. The default here, 2, writes the redo log
	// to the OS at every commit and syncs it once a second: a kill -9 of mariadbd loses no
	// committed transaction (the OS still has the write; only an OS crash would lose up to a
	// second), which is the fault this suite injects. 1 also survives an OS crash, slower.
	FlushAtCommit int

	mu    sync.Mutex
	cmd   *exec.Cmd
	done  chan struct{}
	admin *sql.DB
}

// New installs a fresh datadir and starts the server. Call Close when done.
func New(ctx context.Context) (*Server, error) {
	if _, err := exec.LookPath(bin("mariadbd")); err != nil {
		return nil, fmt.Errorf("server: mariadbd not found (apt-get install mariadb-server): %w", err)
	}
	dir, err := os.MkdirTemp("", "outboxgen-rel-mariadb.")
	if err != nil {
		return nil, err
	}
	s := &Server{Dir: dir, FlushAtCommit: 2}
	if err := s.install(ctx); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s.Port = port
	if err := s.Start(ctx); err != nil {
		s.Close()
		return nil, err
	}
	// The suite's users: "outbox" for the test process (enqueuers, checks), "relworker" for the
	// worker processes, so server-side KILLs can pick the workers' sessions by user.
	for _, u := range []string{"outbox", "relworker"} {
		for _, stmt := range []string{
			fmt.Sprintf("CREATE USER '%s'@'127.0.0.1' IDENTIFIED BY '%s'", u, u),
			fmt.Sprintf("GRANT ALL PRIVILEGES ON *.* TO '%s'@'127.0.0.1'", u),
		} {
			if _, err := s.admin.ExecContext(ctx, stmt); err != nil {
				s.Close()
				return nil, fmt.Errorf("server: %s: %w", stmt, err)
			}
		}
	}
	return s, nil
}

func bin(name string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	return "/usr/sbin/" + name
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func (s *Server) install(ctx context.Context) error {
	data := filepath.Join(s.Dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return err
	}
	if err := os.MkdirAll(s.tmp(), 0o755); err != nil {
		return err
	}
	if err := os.Chmod(s.Dir, 0o755); err != nil {
		return err
	}
	if err := chownMySQL(s.Dir); err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, bin("mariadb-install-db"), "--user=mysql", "--datadir="+data,
		"--auth-root-authentication-method=normal", "--skip-test-db", "--tmpdir="+s.tmp()).CombinedOutput()
	if err != nil {
		return fmt.Errorf("server: mariadb-install-db: %w\n%s", err, out)
	}
	return nil
}

// chownMySQL gives the tree to the mysql user, as mariadbd --user=mysql needs.
func chownMySQL(dir string) error {
	u, err := user.Lookup("mysql")
	if err != nil {
		return fmt.Errorf("server: user mysql: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}

func (s *Server) sock() string { return filepath.Join(s.Dir, "sock") }

// tmp is the server's own tmpdir. With the default /tmp, a mariadbd starting on this machine
// deletes the #sql* files it finds there, including those a concurrent mariadb-install-db is
// using ("Unknown table 'mysql.tmp_proxies_priv'", seen once in CI).
func (s *Server) tmp() string { return filepath.Join(s.Dir, "tmp") }

// Start launches mariadbd on the existing datadir and port and waits until it answers.
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return errors.New("server: already running")
	}
	logf, err := os.OpenFile(filepath.Join(s.Dir, "stdout.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(bin("mariadbd"), "--no-defaults", "--user=mysql",
		"--datadir="+filepath.Join(s.Dir, "data"), "--port="+strconv.Itoa(s.Port),
		"--socket="+s.sock(), "--bind-address=127.0.0.1", "--tmpdir="+s.tmp(),
		"--pid-file="+filepath.Join(s.Dir, "pid"), "--log-error="+filepath.Join(s.Dir, "err.log"),
		"--max-connections=1000", "--innodb-buffer-pool-size=128M",
		"--innodb-flush-log-at-trx-commit="+strconv.Itoa(s.FlushAtCommit),
		"--skip-name-resolve")
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group: a ^C on the test does not reach it before Close does.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("server: start mariadbd: %w", err)
	}
	done := make(chan struct{})
	go func() {
		// The exit status of a killed server is expected; its log says the rest.
		_ = cmd.Wait()
		logf.Close()
		close(done)
	}()
	s.cmd, s.done = cmd, done
	if s.admin == nil {
		cfg := mysql.NewConfig()
		cfg.User = "root"
		cfg.Net = "unix"
		cfg.Addr = s.sock()
		cfg.ParseTime = true
		cfg.Timeout = 2 * time.Second
		db, err := sql.Open("mysql", cfg.FormatDSN())
		if err != nil {
			return err
		}
		db.SetMaxOpenConns(4)
		s.admin = db
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := s.admin.PingContext(pctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-done:
			s.cmd, s.done = nil, nil
			return fmt.Errorf("server: mariadbd exited during start: %s", s.tailLog())
		default:
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("server: not answering after start: %v: %s", err, s.tailLog())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (s *Server) tailLog() string {
	b, err := os.ReadFile(filepath.Join(s.Dir, "err.log"))
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	return strings.Join(lines, "\n")
}

// Stop shuts the server down cleanly (SIGTERM) and waits; after 60s it kills it.
func (s *Server) Stop() error { return s.signal(syscall.SIGTERM, 60*time.Second) }

// Kill is kill -9: no shutdown, InnoDB recovers on the next Start.
func (s *Server) Kill() error { return s.signal(syscall.SIGKILL, 30*time.Second) }

func (s *Server) signal(sig syscall.Signal, wait time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return nil
	}
	if err := s.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("server: signal %v: %w", sig, err)
	}
	select {
	case <-s.done:
	case <-time.After(wait):
		if err := s.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			return fmt.Errorf("server: kill after %v: %w", wait, err)
		}
		<-s.done
	}
	s.cmd, s.done = nil, nil
	// The admin pool's connections died with the server; drop them so the next call dials.
	if s.admin != nil {
		s.admin.SetMaxIdleConns(0)
		s.admin.SetMaxIdleConns(2)
	}
	return nil
}

// Running says whether mariadbd is up (started and not exited).
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return false
	}
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// Admin is a root connection pool over the socket (it survives restarts: the pool redials).
func (s *Server) Admin() *sql.DB { return s.admin }

// DSN is a TCP DSN for user (created by New: "outbox" or "relworker", password = name) on db,
// with the settings MYSQL-NOTES.md requires. addr overrides the address (a proxy); "" = direct.
func (s *Server) DSN(userName, db, addr string) string {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd = userName, userName
	cfg.Net = "tcp"
	cfg.Addr = addr
	if addr == "" {
		cfg.Addr = s.Addr()
	}
	cfg.DBName = db
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	cfg.Timeout = 3 * time.Second
	return cfg.FormatDSN()
}

// Addr is the server's TCP address.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.Port) }

// KillConn runs KILL id (the whole connection) or KILL QUERY id from the admin session.
func (s *Server) KillConn(ctx context.Context, id int64, queryOnly bool) error {
	stmt := "KILL " + strconv.FormatInt(id, 10)
	if queryOnly {
		stmt = "KILL QUERY " + strconv.FormatInt(id, 10)
	}
	_, err := s.admin.ExecContext(ctx, stmt)
	return err
}

// Close kills the server if it runs and removes its directory, unless OUTBOX_REL_KEEP is set
// (then the path is returned in the error-free log of the caller).
func (s *Server) Close() error {
	err := s.Kill()
	if s.admin != nil {
		if cerr := s.admin.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}
	if os.Getenv("OUTBOX_REL_KEEP") == "" {
		if rerr := os.RemoveAll(s.Dir); rerr != nil && err == nil {
			err = rerr
		}
	}
	return err
}
