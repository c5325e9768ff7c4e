package cli

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/go-sql-driver/mysql"
)

// The operator commands' database: connecting, closing, and the driver's log lines.

// open resolves the DSN and connects. The pool is small: each command runs a few statements.
func (c *opsCmd) open(ctx context.Context) (*sql.DB, int, bool) {
	c.ctx = ctx
	d, err := resolveDSN(c.dsnArg, c.getenv)
	if err != nil {
		return nil, c.usageErr("%v", err), false
	}
	c.dsn = d
	c.secrets = append(c.secrets, d.secrets...)
	d.cfg.Logger = &c.log
	connector, err := mysql.NewConnector(d.cfg)
	if err != nil {
		return nil, c.usageErr("invalid DSN: %v", err), false
	}
	db := sql.OpenDB(connector)
	db.SetMaxOpenConns(4)
	// The DSN's timeout bounds the whole connect, handshake included: a host that accepts the
	// TCP connection and then says nothing must not hang the command.
	pingCtx, cancel := context.WithTimeout(ctx, d.cfg.Timeout)
	defer cancel()
	if err := db.PingContext(pingCtx); err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			err = fmt.Errorf("no answer within %s (the DSN's timeout)", d.cfg.Timeout)
		}
		if cerr := db.Close(); cerr != nil {
			err = fmt.Errorf("%w; closing the pool: %v", err, cerr)
		}
		return nil, c.dbErr("cannot connect", err), false
	}
	return db, opsExitOK, true
}

// closeDB closes the pool; an error there is reported, and turns a success into exit 3.
func (c *opsCmd) closeDB(db *sql.DB, code int) int {
	for _, m := range c.log.take() {
		fmt.Fprintf(c.errw, "outboxgen %s: mysql driver: %s\n", c.name, c.line(m))
	}
	if err := db.Close(); err != nil {
		fmt.Fprintf(c.errw, "outboxgen %s: closing the database: %s\n", c.name, c.line(err.Error()))
		if code == opsExitOK {
			return opsExitDB
		}
	}
	return code
}

// opsContext is cancelled by SIGINT/SIGTERM, so a long purge stops between batches.
func opsContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// driverLog collects what go-sql-driver/mysql logs (to os.Stderr by default), which is often
// the real cause behind its "invalid connection" error: a failing command prints it on its one
// error line, a successful one as lines of their own. Either way cleaned of the password.
type driverLog struct {
	mu   sync.Mutex
	msgs []string
}

// Print implements mysql.Logger.
func (l *driverLog) Print(v ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs = append(l.msgs, opsOneLine(fmt.Sprint(v...)))
}

// take returns the lines logged since the last take, and forgets them.
func (l *driverLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.msgs
	l.msgs = nil
	return m
}
