// Package server controls a throwaway database server for the fault suite: install a datadir in
// a temp directory, start the server on it, stop it cleanly, start it again on the same datadir
// and port, kill -9 it, and KILL other sessions through an admin connection. It never touches
// another server: every Server has its own directory, socket and port.
//
// What a kind needs is scripts/server.sh's alone: the root it runs in (server__root), the
// datadir's install (server__setup) and the server's command line (server__launch_argv). This
// package runs those functions with bash and owns the server process: it starts the command,
// signals it and waits for it.
//
// A sid server (mariadb-11.8, mysql-9.7) runs as
//
//	unshare -m --propagation private sh -c 'mount -t proc proc ROOT/proc && exec chroot ROOT mysqld ...'
//
// unshare (no --fork), sh and chroot each exec the next, so the process started here IS the
// server: Kill's SIGKILL reaches mysqld itself, and the private mount namespace (with its /proc
// mount) goes away with it. Start checks that the pid in the server's pid file is that process.
// The datadir lives inside ROOT/tmp, so its path inside the root is the host path without the
// ROOT prefix, and the socket is reachable from the host at Dir/sock.
package server

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Kind names a supported server, as scripts/server.sh does.
type Kind string

const (
	MariaDB1011 Kind = "mariadb-10.11" // Debian 12's mariadb-server
	MariaDB118  Kind = "mariadb-11.8"  // Debian sid's mariadb-server-core, from a sid root
	MySQL97     Kind = "mysql-9.7"     // Debian sid's mysql-server-core (Oracle MySQL 9.7 LTS), from a sid root
)

// Kinds lists every supported kind.
var Kinds = []Kind{MariaDB1011, MariaDB118, MySQL97}

// DefaultKind is the server used when OUTBOX_REL_SERVER is unset.
const DefaultKind = MariaDB1011

// KindFromEnv reads OUTBOX_REL_SERVER (scripts/reliability --server sets it); unset or empty
// means DefaultKind.
func KindFromEnv() (Kind, error) {
	v := os.Getenv("OUTBOX_REL_SERVER")
	if v == "" {
		return DefaultKind, nil
	}
	return ParseKind(v)
}

// ParseKind checks a kind name.
func ParseKind(s string) (Kind, error) {
	for _, k := range Kinds {
		if string(k) == s {
			return k, nil
		}
	}
	return "", fmt.Errorf("server: unknown server kind %q (known: %s, %s, %s)", s, MariaDB1011, MariaDB118, MySQL97)
}

// IsMySQL says whether the kind is Oracle MySQL rather than MariaDB.
func (k Kind) IsMySQL() bool { return k == MySQL97 }

// StartTimeout bounds one Start: how long the kind may take to answer after launch, crash
// recovery after a kill -9 included. MySQL 9.7 is the slow one (about 35 s to initialise a
// datadir on a 2-core machine, and several seconds of recovery after a kill -9, more under load).
func (k Kind) StartTimeout() time.Duration {
	if k.IsMySQL() {
		return 3 * time.Minute
	}
	return 90 * time.Second
}

// serverSh is scripts/server.sh, found from this file's place in the repository.
func serverSh() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "scripts", "server.sh")
}

// shell runs scripts/server.sh's function fn with args, with the SERVER_* variables it reads
// set from s (those that are known yet), and returns its standard output.
func (s *Server) shell(ctx context.Context, fn string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "bash", append([]string{"-c", `source "$0" && "$@"`, serverSh(), fn}, args...)...)
	// The suite's own settings, not those of the environment it runs in.
	cmd.Env = append(os.Environ(), "SERVER_KIND="+string(s.Kind), "SERVER_ROOT="+s.Root, "SERVER_DIR="+s.Dir,
		"SERVER_PORT="+strconv.Itoa(s.Port), "SERVER_FLUSH="+strconv.Itoa(s.FlushAtCommit),
		"SERVER_SYNC_BINLOG=0", "SERVER_EXTRA_ARGS=")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("server: scripts/server.sh %s %s: %w\n%s%s", fn, strings.Join(args, " "), err, out, stderr.String())
	}
	return out, nil
}

// Server is one throwaway server. Methods are not safe for concurrent use, except Admin,
// KillConn and DSN.
type Server struct {
	Kind Kind
	// Root is the sid root the server runs in ("" = this system).
	Root string
	// Dir holds data/, tmp/, the socket, the pid file and err.log. A path on the host; inside
	// the root it is Dir without the Root prefix.
	Dir string
	// Port is fixed for the server's life, so clients reconnect to the same address after Start.
	Port int
	// Version is SELECT VERSION(), read once the server first answered.
	Version string
	// FlushAtCommit is innodb_flush_log_at_trx_commit. The default here, 2, writes the redo log
	// to the OS at every commit and syncs it once a second: a kill -9 of the server loses no
	// committed transaction (the OS still has the write; only an OS crash would lose up to a
	// second), which is the fault this suite injects. 1 also survives an OS crash, slower.
	// MySQL also writes its binlog (on by default) with sync_binlog=0: the write reaches the OS
	// before the commit returns, which a kill -9 does not undo either.
	FlushAtCommit int

	mu    sync.Mutex
	cmd   *exec.Cmd
	done  chan struct{}
	admin *sql.DB
}

// New installs a fresh datadir and starts a server of kind k. Call Close when done.
func New(ctx context.Context, k Kind) (*Server, error) {
	if _, err := ParseKind(string(k)); err != nil {
		return nil, err
	}
	s := &Server{Kind: k, FlushAtCommit: 2}
	root, err := s.shell(ctx, "server__root", string(k))
	if err != nil {
		return nil, err
	}
	s.Root = strings.TrimSpace(string(root))
	if err := s.checkInstalled(); err != nil {
		return nil, err
	}
	// The datadir lives inside the root the server runs in, so one path works inside and outside.
	parent := filepath.Join(s.Root, "tmp")
	if s.Root == "" {
		parent = os.TempDir()
	}
	dir, err := os.MkdirTemp(parent, "outboxgen-rel-"+string(k)+".")
	if err != nil {
		return nil, err
	}
	s.Dir = dir
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
	if err := s.admin.QueryRowContext(ctx, "SELECT VERSION()").Scan(&s.Version); err != nil {
		s.Close()
		return nil, fmt.Errorf("server: SELECT VERSION(): %w", err)
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

// checkInstalled fails with the command that fixes it when the kind's binaries are missing.
func (s *Server) checkInstalled() error {
	if s.Root == "" {
		if _, err := exec.LookPath(bin("mariadbd")); err != nil {
			return fmt.Errorf("server: mariadbd not found (apt-get install mariadb-server): %w", err)
		}
		return nil
	}
	if _, err := os.Stat(filepath.Join(s.Root, ".outboxgen-ready")); err != nil {
		return fmt.Errorf("server: the sid root for %s is not built at %s; build it once (root, a few minutes) with: "+
			"bash -c 'source scripts/server.sh && server_ensure %s' (scripts/reliability does this)", s.Kind, s.Root, s.Kind)
	}
	for _, tool := range []string{"unshare", "chroot", "mount"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("server: %s not found (util-linux, coreutils): %w", tool, err)
		}
	}
	return nil
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

func (s *Server) sock() string { return filepath.Join(s.Dir, "sock") }

// install gives Dir a fresh datadir (and what else the kind's server needs there).
func (s *Server) install(ctx context.Context) error {
	_, err := s.shell(ctx, "server__setup")
	return err
}

// launchCommand is the command that runs the server in the foreground on Dir and Port.
func (s *Server) launchCommand(ctx context.Context) (*exec.Cmd, error) {
	out, err := s.shell(ctx, "server__launch_argv")
	if err != nil {
		return nil, err
	}
	argv := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	if len(argv) == 0 || argv[0] == "" {
		return nil, fmt.Errorf("server: scripts/server.sh server__launch_argv printed no command for %s", s.Kind)
	}
	if !strings.Contains(argv[0], "/") {
		argv[0] = bin(argv[0])
	}
	// Not CommandContext: the server outlives ctx, which only bounds the wait.
	return exec.Command(argv[0], argv[1:]...), nil
}

// Start launches the server on the existing datadir and port and waits (up to the kind's
// StartTimeout, or ctx) until it answers.
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
	// A stale pid file would make the check below compare against the previous incarnation.
	if err := os.Remove(filepath.Join(s.Dir, "pid")); err != nil && !errors.Is(err, os.ErrNotExist) {
		logf.Close()
		return err
	}
	cmd, err := s.launchCommand(ctx)
	if err != nil {
		logf.Close()
		return err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group: a ^C on the test does not reach it before Close does.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("server: start %s: %w", s.Kind, err)
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
	deadline := time.Now().Add(s.Kind.StartTimeout())
	for {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := s.admin.PingContext(pctx)
		cancel()
		if err == nil {
			break
		}
		select {
		case <-done:
			s.cmd, s.done = nil, nil
			return fmt.Errorf("server: %s exited during start: %s", s.Kind, s.tailLog())
		default:
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("server: %s not answering %v after start: %v: %s", s.Kind, s.Kind.StartTimeout(), err, s.tailLog())
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Kill must reach the server itself, not a wrapper that would leave it running: the pid the
	// server wrote is the process started here (unshare, sh and chroot exec'd into it).
	b, err := os.ReadFile(filepath.Join(s.Dir, "pid"))
	if err != nil {
		return fmt.Errorf("server: %s answers but its pid file is unreadable: %w", s.Kind, err)
	}
	if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err != nil || pid != cmd.Process.Pid {
		return fmt.Errorf("server: %s wrote pid %q but the process started is %d: a signal would miss the server", s.Kind, strings.TrimSpace(string(b)), cmd.Process.Pid)
	}
	return nil
}

// Pid is the running server's process id (0 when it is not running).
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
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

// Stop shuts the server down cleanly (SIGTERM) and waits; after the kind's StartTimeout it
// kills it.
func (s *Server) Stop() error { return s.signal(syscall.SIGTERM, s.Kind.StartTimeout()) }

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

// Running says whether the server is up (started and not exited).
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
// with the settings the runtime requires (parseTime, loc=UTC: docs/setup.md). addr overrides
// the address (a proxy); "" = direct.
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

// String names the server for logs and the report: kind, version and address.
func (s *Server) String() string {
	return fmt.Sprintf("%s (SELECT VERSION() = %s) on %s", s.Kind, s.Version, s.Addr())
}

// KillConn runs KILL id (the whole connection) or KILL QUERY id from the admin session. The id
// is formatted into the statement: MySQL refuses a placeholder there (error 6413, "Dynamic
// parameters can only be used in DML statements").
func (s *Server) KillConn(ctx context.Context, id int64, queryOnly bool) error {
	stmt := "KILL " + strconv.FormatInt(id, 10)
	if queryOnly {
		stmt = "KILL QUERY " + strconv.FormatInt(id, 10)
	}
	_, err := s.admin.ExecContext(ctx, stmt)
	return err
}

// Close kills the server if it runs and removes its directory, unless OUTBOX_REL_KEEP is set.
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
