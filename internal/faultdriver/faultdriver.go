// Package faultdriver is a database/sql driver that wraps go-sql-driver/mysql and lets a test
// make chosen statements fail or answer with chosen values, for the paths a real server cannot be
// made to take on demand: a RELEASE_LOCK whose query errors, a GET_LOCK that returns the string
// "0" (what go-sql-driver v1.7.1 sent on the text protocol) or NULL, a lost reply after the
// server did the work.
//
// It is not a mock: every statement that no rule matches goes to the real server on a real
// connection, so sessions, locks and transactions behave as in production. Each test makes its
// own Injector, so tests running in parallel never see each other's rules:
//
//	inj := faultdriver.New()
//	db, err := inj.OpenDB(dsn) // or sql.Open(faultdriver.DriverName, inj.DSN(dsn))
//	r := inj.Add(faultdriver.Rule{Match: `RELEASE_LOCK`, Err: errors.New("boom"), Times: 1})
//	... r.Hits() ...
//	r.Remove()
package faultdriver

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
)

// DriverName is the name the wrapper is registered under with database/sql. Its data source
// names have the form "<injector id>|<go-sql-driver DSN>"; Injector.DSN builds one.
const DriverName = "faultmysql"

func init() { sql.Register(DriverName, Driver{}) }

// Rule says what happens to the statements whose SQL text matches Match.
//
// Without Passthrough the statement never reaches the server: the caller gets Err, or else the
// Rows. With Passthrough the statement runs on the server first (its effects happen: a lock is
// released, a row inserted) and then the caller gets Err or Rows instead of the server's answer,
// like a reply lost or mangled on the way back.
type Rule struct {
	// Match is a regular expression searched for in the statement's SQL text.
	Match string
	// Err, when set, is returned instead of the server's answer. driver.ErrBadConn makes
	// database/sql discard the connection, as a broken socket would.
	Err error
	// Rows is the answer to a query when Err is nil: each inner slice is one row of
	// driver.Values (int64, float64, bool, []byte, string, time.Time or nil for NULL).
	// A []byte("0") is what old drivers sent for an integer on the text protocol.
	Rows [][]driver.Value
	// Columns names the columns of Rows; defaults to c0, c1, ...
	Columns []string
	// RowsAffected is the answer to an Exec when Err is nil.
	RowsAffected int64
	// Passthrough runs the statement on the server before answering with Err or Rows.
	Passthrough bool
	// Times limits how often the rule fires; 0 means every time.
	Times int
	// Delay sleeps before answering (or before sending, with Passthrough), honouring the
	// context: a cancelled context returns its error.
	Delay time.Duration
}

// Handle is an installed rule.
type Handle struct {
	in   *Injector
	rule Rule
	re   *regexp.Regexp
	hits int // guarded by in.mu
}

// Hits reports how many statements the rule has answered so far.
func (h *Handle) Hits() int {
	h.in.mu.Lock()
	defer h.in.mu.Unlock()
	return h.hits
}

// Remove uninstalls the rule; statements then reach the server unchanged.
func (h *Handle) Remove() {
	h.in.mu.Lock()
	defer h.in.mu.Unlock()
	for i, r := range h.in.rules {
		if r == h {
			h.in.rules = append(h.in.rules[:i], h.in.rules[i+1:]...)
			return
		}
	}
}

// Injector holds one test's rules. Its methods are safe for concurrent use.
type Injector struct {
	id    string
	mu    sync.Mutex
	rules []*Handle
	seen  []string
}

var (
	registryMu sync.Mutex
	registry   = map[string]*Injector{}
	nextID     int
)

// New returns an Injector with no rules, registered so that Injector.DSN names it.
func New() *Injector {
	registryMu.Lock()
	defer registryMu.Unlock()
	nextID++
	in := &Injector{id: "inj" + strconv.Itoa(nextID)}
	registry[in.id] = in
	return in
}

// Add installs a rule and returns its handle. Rules are tried in the order they were added;
// the first match whose Times is not used up answers. A Match that does not compile panics:
// it is a bug in the test.
func (in *Injector) Add(r Rule) *Handle {
	h := &Handle{in: in, rule: r, re: regexp.MustCompile(r.Match)}
	in.mu.Lock()
	defer in.mu.Unlock()
	in.rules = append(in.rules, h)
	return h
}

// Fail makes every statement matching pattern fail with err without reaching the server.
func (in *Injector) Fail(pattern string, err error) *Handle {
	return in.Add(Rule{Match: pattern, Err: err})
}

// Return makes every query matching pattern answer with one row of the given values without
// reaching the server.
func (in *Injector) Return(pattern string, row ...driver.Value) *Handle {
	return in.Add(Rule{Match: pattern, Rows: [][]driver.Value{row}})
}

// Statements returns the SQL text of every statement seen so far (answered by a rule or not),
// in order.
func (in *Injector) Statements() []string {
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]string(nil), in.seen...)
}

// DSN returns the data source name for sql.Open(DriverName, ...) that routes dsn (a
// go-sql-driver/mysql DSN) through this injector.
func (in *Injector) DSN(dsn string) string { return in.id + "|" + dsn }

// Connector returns a driver.Connector for sql.OpenDB.
func (in *Injector) Connector(dsn string) (driver.Connector, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("faultdriver: %w", err)
	}
	inner, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("faultdriver: %w", err)
	}
	return &connector{in: in, inner: inner}, nil
}

// OpenDB opens a pool on dsn (a go-sql-driver/mysql DSN) whose statements pass this injector.
func (in *Injector) OpenDB(dsn string) (*sql.DB, error) {
	c, err := in.Connector(dsn)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(c), nil
}

// match records the statement and returns the rule that answers it, or nil.
func (in *Injector) match(query string) *Handle {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.seen = append(in.seen, query)
	for _, h := range in.rules {
		if h.rule.Times > 0 && h.hits >= h.rule.Times {
			continue
		}
		if h.re.MatchString(query) {
			h.hits++
			return h
		}
	}
	return nil
}

// Driver is the registered driver.
type Driver struct{}

// Open implements driver.Driver.
func (d Driver) Open(name string) (driver.Conn, error) {
	c, err := d.OpenConnector(name)
	if err != nil {
		return nil, err
	}
	return c.Connect(context.Background())
}

// OpenConnector implements driver.DriverContext.
func (Driver) OpenConnector(name string) (driver.Connector, error) {
	id, dsn, ok := strings.Cut(name, "|")
	if !ok {
		return nil, fmt.Errorf("faultdriver: data source name must be <injector id>|<dsn> (use Injector.DSN)")
	}
	registryMu.Lock()
	in := registry[id]
	registryMu.Unlock()
	if in == nil {
		return nil, fmt.Errorf("faultdriver: no injector %q", id)
	}
	return in.Connector(dsn)
}

type connector struct {
	in    *Injector
	inner driver.Connector
}

func (c *connector) Connect(ctx context.Context) (driver.Conn, error) {
	ic, err := c.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &conn{in: c.in, inner: ic}, nil
}

func (c *connector) Driver() driver.Driver { return Driver{} }

// The interfaces go-sql-driver's connection implements, which the wrapper forwards.
type innerConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.QueryerContext
	driver.ExecerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
	driver.NamedValueChecker
}

type conn struct {
	in    *Injector
	inner driver.Conn
}

var (
	_ driver.ConnBeginTx        = (*conn)(nil)
	_ driver.ConnPrepareContext = (*conn)(nil)
	_ driver.QueryerContext     = (*conn)(nil)
	_ driver.ExecerContext      = (*conn)(nil)
	_ driver.Pinger             = (*conn)(nil)
	_ driver.SessionResetter    = (*conn)(nil)
	_ driver.Validator          = (*conn)(nil)
	_ driver.NamedValueChecker  = (*conn)(nil)
)

func (c *conn) ic() innerConn {
	ic, ok := c.inner.(innerConn)
	if !ok {
		// go-sql-driver/mysql implements all of them; a version that stops doing so must fail loudly.
		panic(fmt.Sprintf("faultdriver: %T no longer implements the forwarded interfaces", c.inner))
	}
	return ic
}

func (c *conn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c *conn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	s, err := c.ic().PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	return &stmt{in: c.in, inner: s, query: query}, nil
}

func (c *conn) Close() error                   { return c.inner.Close() }
func (c *conn) Begin() (driver.Tx, error)      { return c.BeginTx(context.Background(), driver.TxOptions{}) }
func (c *conn) Ping(ctx context.Context) error { return c.ic().Ping(ctx) }
func (c *conn) IsValid() bool                  { return c.ic().IsValid() }

func (c *conn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	return c.ic().BeginTx(ctx, opts)
}

func (c *conn) ResetSession(ctx context.Context) error { return c.ic().ResetSession(ctx) }

func (c *conn) CheckNamedValue(nv *driver.NamedValue) error { return c.ic().CheckNamedValue(nv) }

// QueryContext answers matching queries here, before go-sql-driver can return driver.ErrSkip
// (it does for any query with arguments unless interpolateParams is on); database/sql then
// prepares the statement, and stmt.QueryContext checks the rules again for unmatched ones.
func (c *conn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	h := c.in.match(query)
	if h == nil {
		return c.ic().QueryContext(ctx, query, args)
	}
	return answerQuery(ctx, h, func() error {
		rows, err := c.ic().QueryContext(ctx, query, args)
		if errors.Is(err, driver.ErrSkip) {
			var s driver.Stmt
			s, err = c.ic().PrepareContext(ctx, query)
			if err != nil {
				return err
			}
			defer s.Close()
			rows, err = s.(driver.StmtQueryContext).QueryContext(ctx, args)
		}
		if err != nil {
			return err
		}
		return drain(rows)
	})
}

func (c *conn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	h := c.in.match(query)
	if h == nil {
		return c.ic().ExecContext(ctx, query, args)
	}
	return answerExec(ctx, h, func() error {
		_, err := c.ic().ExecContext(ctx, query, args)
		if errors.Is(err, driver.ErrSkip) {
			var s driver.Stmt
			s, err = c.ic().PrepareContext(ctx, query)
			if err != nil {
				return err
			}
			defer s.Close()
			_, err = s.(driver.StmtExecContext).ExecContext(ctx, args)
		}
		return err
	})
}

type stmt struct {
	in    *Injector
	inner driver.Stmt
	query string
}

var (
	_ driver.StmtQueryContext  = (*stmt)(nil)
	_ driver.StmtExecContext   = (*stmt)(nil)
	_ driver.NamedValueChecker = (*stmt)(nil)
)

func (s *stmt) Close() error  { return s.inner.Close() }
func (s *stmt) NumInput() int { return s.inner.NumInput() }

func (s *stmt) CheckNamedValue(nv *driver.NamedValue) error {
	if c, ok := s.inner.(driver.NamedValueChecker); ok {
		return c.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

// Exec and Query complete driver.Stmt; database/sql calls the Context forms.
func (s *stmt) Exec(args []driver.Value) (driver.Result, error) {
	return s.ExecContext(context.Background(), named(args))
}

func (s *stmt) Query(args []driver.Value) (driver.Rows, error) {
	return s.QueryContext(context.Background(), named(args))
}

func (s *stmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	h := s.in.match(s.query)
	if h == nil {
		return s.inner.(driver.StmtQueryContext).QueryContext(ctx, args)
	}
	return answerQuery(ctx, h, func() error {
		rows, err := s.inner.(driver.StmtQueryContext).QueryContext(ctx, args)
		if err != nil {
			return err
		}
		return drain(rows)
	})
}

func (s *stmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	h := s.in.match(s.query)
	if h == nil {
		return s.inner.(driver.StmtExecContext).ExecContext(ctx, args)
	}
	return answerExec(ctx, h, func() error {
		_, err := s.inner.(driver.StmtExecContext).ExecContext(ctx, args)
		return err
	})
}

func named(args []driver.Value) []driver.NamedValue {
	out := make([]driver.NamedValue, len(args))
	for i, v := range args {
		out[i] = driver.NamedValue{Ordinal: i + 1, Value: v}
	}
	return out
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// answerQuery applies h: optionally runs the real statement (run), then answers.
func answerQuery(ctx context.Context, h *Handle, run func() error) (driver.Rows, error) {
	if err := sleep(ctx, h.rule.Delay); err != nil {
		return nil, err
	}
	if h.rule.Passthrough {
		if err := run(); err != nil {
			return nil, err
		}
	}
	if h.rule.Err != nil {
		return nil, h.rule.Err
	}
	cols := h.rule.Columns
	if cols == nil {
		n := 0
		if len(h.rule.Rows) > 0 {
			n = len(h.rule.Rows[0])
		}
		for i := 0; i < n; i++ {
			cols = append(cols, "c"+strconv.Itoa(i))
		}
	}
	return &rows{cols: cols, data: h.rule.Rows}, nil
}

func answerExec(ctx context.Context, h *Handle, run func() error) (driver.Result, error) {
	if err := sleep(ctx, h.rule.Delay); err != nil {
		return nil, err
	}
	if h.rule.Passthrough {
		if err := run(); err != nil {
			return nil, err
		}
	}
	if h.rule.Err != nil {
		return nil, h.rule.Err
	}
	return driver.RowsAffected(h.rule.RowsAffected), nil
}

// drain reads and closes the server's rows, so the connection is free for the next statement.
func drain(r driver.Rows) error {
	dest := make([]driver.Value, len(r.Columns()))
	for {
		err := r.Next(dest)
		if err == io.EOF {
			break
		}
		if err != nil {
			return errors.Join(err, r.Close())
		}
	}
	return r.Close()
}

type rows struct {
	cols []string
	data [][]driver.Value
	i    int
}

func (r *rows) Columns() []string { return r.cols }
func (r *rows) Close() error      { return nil }

func (r *rows) Next(dest []driver.Value) error {
	if r.i >= len(r.data) {
		return io.EOF
	}
	copy(dest, r.data[r.i])
	r.i++
	return nil
}
