// Package outboxent lets outbox.Enqueue and the generated EnqueueX run inside an ent
// transaction. ent's generated Tx has ExecContext and QueryContext when the client is
// generated with the sql/execquery feature (entc: --feature sql/execquery), but no
// QueryRowContext, which outbox.DBTX lists: Tx supplies it.
//
//	tx, err := client.Tx(ctx)
//	...
//	id, err := events.EnqueueOrderPlaced(ctx, outboxent.Tx(tx), e)
//	...
//	err = tx.Commit()
//	outbox.Wake(db) // the *sql.DB the client was opened on
package outboxent

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"reflect"
	"sync"

	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// ExecQuerier is what ent's sql/execquery feature gives a generated Tx and Client.
type ExecQuerier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// Tx returns h as an outbox.DBTX. h is an ent transaction (the generated *Tx): the message
// commits or rolls back with it. Given anything without a Commit method (the generated
// *Client, which autocommits each statement), Tx returns a handle that outbox.Enqueue treats
// as a pool: refused unless outbox.Standalone() is given, and then an ordered message gets a
// transaction of its own from the client's BeginTx.
//
// Statements go through h with placeholders and their arguments, which ent passes to
// database/sql unchanged. The returned handle's QueryRowContext, which Enqueue does not use,
// returns a row whose Scan fails.
func Tx(h ExecQuerier) outbox.DBTX {
	if c, ok := h.(interface{ Commit() error }); ok {
		return &txHandle{ExecQuerier: h, commit: c.Commit, rollback: rollbackOf(h)}
	}
	return poolHandle{h}
}

// txHandle is an ent transaction. Its Commit makes outbox.Enqueue take it for a transaction.
type txHandle struct {
	ExecQuerier
	commit   func() error
	rollback func() error
}

func (t *txHandle) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return failedRow(ctx)
}

func (t *txHandle) Commit() error { return t.commit() }

func (t *txHandle) Rollback() error {
	if t.rollback == nil {
		return errors.New("outboxent: the transaction has no Rollback method")
	}
	return t.rollback()
}

func rollbackOf(h any) func() error {
	if r, ok := h.(interface{ Rollback() error }); ok {
		return r.Rollback
	}
	return nil
}

// poolHandle is an ent client. Its BeginTx makes outbox.Enqueue take it for a pool.
type poolHandle struct{ ExecQuerier }

func (p poolHandle) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return failedRow(ctx)
}

var (
	ctxType       = reflect.TypeOf((*context.Context)(nil)).Elem()
	txOptionsType = reflect.TypeOf((*sql.TxOptions)(nil))
	errorType     = reflect.TypeOf((*error)(nil)).Elem()
)

// BeginTx begins a transaction through the client's own BeginTx, whose result type is the
// generated package's *Tx, so it is called by reflection.
func (p poolHandle) BeginTx(ctx context.Context, opts *sql.TxOptions) (*txHandle, error) {
	m := reflect.ValueOf(p.ExecQuerier).MethodByName("BeginTx")
	if !m.IsValid() {
		return nil, fmt.Errorf("outboxent: %T has no BeginTx method", p.ExecQuerier)
	}
	mt := m.Type()
	if mt.NumIn() != 2 || mt.In(0) != ctxType || mt.In(1) != txOptionsType || mt.IsVariadic() ||
		mt.NumOut() != 2 || mt.Out(1) != errorType {
		return nil, fmt.Errorf("outboxent: %T.BeginTx is %s, not func(context.Context, *sql.TxOptions) (*Tx, error)", p.ExecQuerier, mt)
	}
	out := m.Call([]reflect.Value{reflect.ValueOf(ctx), reflect.ValueOf(opts)})
	if err, _ := out[1].Interface().(error); err != nil {
		return nil, err
	}
	tx, ok := out[0].Interface().(ExecQuerier)
	if !ok {
		if r, ok := out[0].Interface().(interface{ Rollback() error }); ok {
			_ = r.Rollback()
		}
		return nil, fmt.Errorf("outboxent: %T.BeginTx returned %s, which has no ExecContext or QueryContext: generate the client with --feature sql/execquery", p.ExecQuerier, out[0].Type())
	}
	h, ok := Tx(tx).(*txHandle)
	if !ok {
		return nil, fmt.Errorf("outboxent: %T.BeginTx returned %s, which has no Commit method", p.ExecQuerier, out[0].Type())
	}
	return h, nil
}

// errNoQueryRow is the error of every row failedRow returns.
var errNoQueryRow = errors.New("outboxent: QueryRowContext is not supported on an ent handle: use QueryContext")

// failedRow returns a *sql.Row whose Scan returns errNoQueryRow. database/sql offers no way
// to make one but a query, so it comes from a pool whose every connection attempt fails.
func failedRow(ctx context.Context) *sql.Row {
	return noRowsDB().QueryRowContext(ctx, "")
}

var noRowsDB = sync.OnceValue(func() *sql.DB { return sql.OpenDB(refusing{}) })

// refusing is a connector that never connects.
type refusing struct{}

func (refusing) Connect(context.Context) (driver.Conn, error) { return nil, errNoQueryRow }
func (refusing) Driver() driver.Driver                        { return refusingDriver{} }

type refusingDriver struct{}

func (refusingDriver) Open(string) (driver.Conn, error) { return nil, errNoQueryRow }
