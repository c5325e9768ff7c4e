package main

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"sync/atomic"

	"github.com/go-sql-driver/mysql"
)

// stmtCounter counts the SQL statements a pool sends to the server, through countingConnector:
// the consumer in a child process runs on such a pool, so its count is every statement of that
// consumer (claims or polls, result writes or acks, maintenance) and nothing else's.
//
// A statement is what the server executes: BEGIN counts 1, plus 1 for the SET TRANSACTION
// ISOLATION LEVEL the driver sends first when the transaction asks for a level (both systems do:
// outboxgen's claim READ COMMITTED, watermill's poll SERIALIZABLE); COMMIT and ROLLBACK 1;
// every query or exec 1, whether sent inline (interpolateParams, or no arguments) or as a
// prepared statement's execute. The prepare and close of a prepared statement (the driver's
// default DSN) are round trips, not statements: they are counted apart, in Prepares.
type stmtCounter struct {
	Stmts    atomic.Int64
	Txs      atomic.Int64
	Prepares atomic.Int64
}

// openCountingPool opens a pool like openPool whose connections count into the returned counter.
func openCountingPool(dsn string) (*sql.DB, *stmtCounter, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, nil, err
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, nil, err
	}
	n := &stmtCounter{}
	db := sql.OpenDB(countingConnector{conn, n})
	db.SetMaxIdleConns(poolSize)
	db.SetMaxOpenConns(poolSize)
	return db, n, nil
}

type countingConnector struct {
	driver.Connector
	n *stmtCounter
}

func (c countingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: conn, n: c.n}, nil
}

// countingConn forwards every interface go-sql-driver/mysql's connection implements, so
// database/sql treats it as it treats the driver's own (fast paths, argument checks, session
// reset); only the counting is added.
type countingConn struct {
	driver.Conn
	n *stmtCounter
}

var (
	_ driver.ConnBeginTx        = (*countingConn)(nil)
	_ driver.ConnPrepareContext = (*countingConn)(nil)
	_ driver.QueryerContext     = (*countingConn)(nil)
	_ driver.ExecerContext      = (*countingConn)(nil)
	_ driver.Pinger             = (*countingConn)(nil)
	_ driver.SessionResetter    = (*countingConn)(nil)
	_ driver.Validator          = (*countingConn)(nil)
	_ driver.NamedValueChecker  = (*countingConn)(nil)
)

func (c *countingConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	tx, err := c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	c.n.Txs.Add(1)
	c.n.Stmts.Add(1)
	if sql.IsolationLevel(opts.Isolation) != sql.LevelDefault {
		c.n.Stmts.Add(1) // SET TRANSACTION ISOLATION LEVEL ...
	}
	return countingTx{tx, c.n}, nil
}

func (c *countingConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *countingConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	st, err := c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	c.n.Prepares.Add(1)
	return &countingStmt{Stmt: st, n: c.n}, nil
}

func (c *countingConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

// QueryContext and ExecContext: the driver answers driver.ErrSkip (arguments without
// interpolateParams) before sending anything; database/sql then prepares, and the execute is
// counted on the statement.
func (c *countingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	rows, err := c.Conn.(driver.QueryerContext).QueryContext(ctx, query, args)
	if !errors.Is(err, driver.ErrSkip) {
		c.n.Stmts.Add(1)
	}
	return rows, err
}

func (c *countingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	res, err := c.Conn.(driver.ExecerContext).ExecContext(ctx, query, args)
	if !errors.Is(err, driver.ErrSkip) {
		c.n.Stmts.Add(1)
	}
	return res, err
}

func (c *countingConn) Ping(ctx context.Context) error { return c.Conn.(driver.Pinger).Ping(ctx) }

func (c *countingConn) ResetSession(ctx context.Context) error {
	return c.Conn.(driver.SessionResetter).ResetSession(ctx)
}

func (c *countingConn) IsValid() bool { return c.Conn.(driver.Validator).IsValid() }

func (c *countingConn) CheckNamedValue(nv *driver.NamedValue) error {
	return c.Conn.(driver.NamedValueChecker).CheckNamedValue(nv)
}

type countingTx struct {
	driver.Tx
	n *stmtCounter
}

func (t countingTx) Commit() error {
	t.n.Stmts.Add(1)
	return t.Tx.Commit()
}

func (t countingTx) Rollback() error {
	t.n.Stmts.Add(1)
	return t.Tx.Rollback()
}

type countingStmt struct {
	driver.Stmt
	n *stmtCounter
}

var (
	_ driver.StmtQueryContext  = (*countingStmt)(nil)
	_ driver.StmtExecContext   = (*countingStmt)(nil)
	_ driver.NamedValueChecker = (*countingStmt)(nil)
)

func (s *countingStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	s.n.Stmts.Add(1)
	return s.Stmt.(driver.StmtQueryContext).QueryContext(ctx, args)
}

func (s *countingStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	s.n.Stmts.Add(1)
	return s.Stmt.(driver.StmtExecContext).ExecContext(ctx, args)
}

func (s *countingStmt) CheckNamedValue(nv *driver.NamedValue) error {
	return s.Stmt.(driver.NamedValueChecker).CheckNamedValue(nv)
}
