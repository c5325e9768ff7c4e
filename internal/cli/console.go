// outboxgen console: the on-call web console (runtime/outboxconsole) served on its own.

package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/outboxgen/outboxgen/runtime/outboxconsole"
)

// envConsoleToken is read when --token is not given, so the token need not appear in a
// process listing.
const envConsoleToken = "OUTBOX_CONSOLE_TOKEN"

// serverLimits bounds what one connection may hold of the console's server: a client that
// sends its headers or body slowly, or keeps an idle connection open, is cut off instead of
// holding a connection and a goroutine for as long as it likes.
type serverLimits struct {
	// ReadHeader and Read bound reading a request's headers, then all of it; the console's
	// forms are small. Write bounds the handler and the response together, so it exceeds the
	// console's query timeout (15s). Idle bounds a kept-alive connection between requests.
	ReadHeader, Read, Write, Idle time.Duration
	MaxHeaderBytes                int
}

var defaultServerLimits = serverLimits{
	ReadHeader: 10 * time.Second, Read: 30 * time.Second, Write: 60 * time.Second, Idle: 2 * time.Minute,
	MaxHeaderBytes: 64 << 10,
}

// consoleServer is the console's http.Server.
func consoleServer(h http.Handler, logger *slog.Logger, l serverLimits) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: l.ReadHeader,
		ReadTimeout:       l.Read,
		WriteTimeout:      l.Write,
		IdleTimeout:       l.Idle,
		MaxHeaderBytes:    l.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
}

const consoleHelp = `usage: outboxgen console [--addr 127.0.0.1:8080] [--allow-writes] [--token T] [--dsn DSN]

Serves the on-call web console until Ctrl-C: per event type the counts and ages of status, its
alerts, a backlog and throughput chart of the last hour (sampled by the console every 10s, kept
in memory), the FAILED messages newest first, one message whole, and the named-lock jobs' last
runs. Every page reads without JavaScript.

Read-only unless --allow-writes: then retry (one message, the selected ones, or every FAILED
message of a type) and purge (FAILED messages by id), each confirmed after a dry run,
CSRF-protected, and logged on stderr as "console write" with the remote address, the action,
the ids or event type, and the count.

It binds to loopback by default and then answers only requests addressed to a loopback name
(no DNS rebinding). Any other --addr needs a random token (--token, or better
$OUTBOX_CONSOLE_TOKEN, which keeps it out of the process list): at least 16 characters, 8
distinct ones and about 64 bits by their count, e.g. from ` + "`openssl rand -hex 32`" + `. The
browser gets a login form, scripts send "Authorization: Bearer <token>"; wrong tokens are
throttled (10 at once per address, then one every 6s; 429 past that). The console speaks plain
HTTP: over a network, prefer an SSH tunnel to a loopback console, or a TLS proxy in front of it.
`

func runConsole(args []string, stdout, stderr io.Writer) int {
	ctx, stop := opsContext()
	defer stop()
	return serveConsole(ctx, args, stdout, stderr, os.Getenv, nil)
}

// serveConsole runs the console until ctx is done, with getenv for the environment; ready,
// when not nil, is called with the listening address once it accepts connections (tests).
func serveConsole(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string, ready func(net.Addr)) int {
	return serveConsoleLimits(ctx, args, stdout, stderr, getenv, ready, defaultServerLimits)
}

// serveConsoleLimits is serveConsole with the server's limits given (tests shorten them).
func serveConsoleLimits(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string, ready func(net.Addr), limits serverLimits) int {
	c := newOpsCmd("console", consoleHelp, stdout, stderr)
	c.getenv = getenv
	addr := c.fs.String("addr", "127.0.0.1:8080", "listen address; not loopback needs --token")
	writes := c.fs.Bool("allow-writes", false, "enable retry, purge, cancel, run now, pause and resume (each CSRF-protected and logged; retry, purge, cancel and run now confirmed after a dry run)")
	tokenFlag := c.fs.String("token", "", "token the browser or a script must give (default $"+envConsoleToken+")")
	if code, ok := c.parse(args); !ok {
		return code
	}
	token := *tokenFlag
	if token == "" {
		token = c.getenv(envConsoleToken)
	}
	loopback, err := loopbackAddr(*addr)
	if err != nil {
		return c.usageErr("--addr %s: %v", *addr, err)
	}
	switch {
	case !loopback && token == "":
		return c.usageErr("--addr %s is not a loopback address: anyone who reaches it could read payloads%s; give a --token (or $%s), or bind to 127.0.0.1",
			*addr, map[bool]string{true: " and retry or purge", false: ""}[*writes], envConsoleToken)
	}
	if token != "" {
		if err := outboxconsole.CheckToken(token); err != nil {
			return c.usageErr("%v", err)
		}
	}
	db, code, ok := c.open(ctx)
	if !ok {
		return code
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	opts := []outboxconsole.Option{
		outboxconsole.WithLogger(logger),
		outboxconsole.WithRedact(c.clean),
		outboxconsole.WithTitle(c.clean(c.dsn.shown)),
		outboxconsole.WithToken(token),
	}
	if *writes {
		opts = append(opts, outboxconsole.AllowWrites())
	}
	cons := outboxconsole.New(db, opts...)
	defer cons.Close()
	var h http.Handler = cons
	if token == "" {
		h = loopbackHostOnly(cons)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		cons.Close()
		return c.closeDB(db, c.usageErr("cannot listen on %s: %v", *addr, err))
	}
	srv := consoleServer(h, logger, limits)
	mode := "read-only"
	if *writes {
		mode = "writes allowed"
	}
	auth := "no token (loopback)"
	if token != "" {
		auth = "token required"
	}
	fmt.Fprintf(c.out, "outboxgen console: http://%s/ (%s, %s) for %s; Ctrl-C stops it\n", ln.Addr(), mode, auth, c.line(c.dsn.shown))
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	if ready != nil {
		ready(ln.Addr())
	}
	code = opsExitOK
	select {
	case <-ctx.Done():
		shutCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(shutCtx); err != nil {
			fmt.Fprintf(c.errw, "outboxgen console: shutdown: %s\n", c.line(err.Error()))
		}
	case err := <-served:
		if !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(c.errw, "outboxgen console: serve: %s\n", c.line(err.Error()))
			code = opsExitDB
		}
	}
	cons.Close()
	return c.closeDB(db, code)
}

// loopbackAddr says whether a listen address binds to loopback only: localhost, 127.0.0.0/8 or
// ::1. An empty host (":8080") binds every interface.
func loopbackAddr(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, errors.New("want host:port, e.g. 127.0.0.1:8080")
	}
	if strings.EqualFold(host, "localhost") {
		return true, nil
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback(), nil
}

// loopbackHostOnly answers only requests whose Host names loopback (localhost, 127.x, [::1]):
// a console without a token trusts whoever reaches it, and a web page on another site could
// otherwise reach it by pointing its own name at 127.0.0.1 (DNS rebinding).
func loopbackHostOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
		ip := net.ParseIP(host)
		if !strings.EqualFold(host, "localhost") && (ip == nil || !ip.IsLoopback()) {
			http.Error(w, "421 misdirected request: this console answers only to a loopback address (localhost, 127.0.0.1, [::1])", http.StatusMisdirectedRequest)
			return
		}
		next.ServeHTTP(w, r)
	})
}
