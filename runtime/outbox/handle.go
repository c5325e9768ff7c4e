// What an enqueue's handle is. It may be a transaction its statements join, or a pool on which
// each statement commits on its own. It may be one session that may or may not have a
// transaction open. Enqueue refuses a handle that would commit its message on its own unless
// Standalone says so. It then makes the statements of an ordered message commit together in a
// transaction of its own.

package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"reflect"

	"github.com/go-sql-driver/mysql"

	"github.com/outboxgen/outboxgen/queries"
)

type handleKind int

const (
	// handleTx is a transaction, such as *sql.Tx, a type wrapping one, or any type with a
	// Commit method.
	handleTx handleKind = iota
	// handlePool commits each statement on its own, on whichever connection it gets. It is
	// *sql.DB, or a type embedding one, which has Stats. It is also any other type that can
	// begin transactions and has no Commit, such as GORM's PrepareStmt pool.
	handlePool
	// handleConn is one session, inside a transaction or not. It is *sql.Conn, or a type
	// wrapping one, which has Raw. inTransaction tells which.
	handleConn
)

// kindOf classifies tx by its type alone, with no round trip. A *sql.Tx, the hot path, is
// answered by the first case. A type that has neither Commit nor BeginTx is taken for a
// transaction, since nothing could make it atomic anyway.
func kindOf(tx DBTX) handleKind {
	switch tx.(type) {
	case *sql.Tx:
		return handleTx
	case *sql.DB:
		return handlePool
	case *sql.Conn:
		return handleConn
	}
	if _, ok := tx.(interface{ Commit() error }); ok {
		return handleTx // an ORM's transaction, a type wrapping *sql.Tx
	}
	if _, ok := tx.(interface{ Stats() sql.DBStats }); ok {
		return handlePool
	}
	if _, ok := tx.(interface{ Raw(func(any) error) error }); ok {
		return handleConn
	}
	// By name, whatever the signature, since ORMs return their own transaction types from BeginTx.
	t := reflect.TypeOf(tx)
	if _, ok := t.MethodByName("Commit"); ok {
		return handleTx
	}
	if _, ok := t.MethodByName("BeginTx"); ok {
		return handlePool
	}
	return handleTx
}

// The probe's statements, from queries/txprobe.sql.
var probeSavepoint, probeRelease = queries.TxProbe()

// erSavepointDoesNotExist is ER_SP_DOES_NOT_EXIST, which RELEASE SAVEPOINT returns outside a
// transaction on MariaDB and MySQL alike.
const erSavepointDoesNotExist = 1305

// inTransaction says whether the session behind conn has a transaction open, after BEGIN or
// with autocommit off. Statements on it then commit with that transaction and not one by one.
// A savepoint outlives its statement only inside a transaction. Outside, its release fails
// with error 1305. The probe costs two round trips, paid only on a *sql.Conn.
func inTransaction(ctx context.Context, conn DBTX) (bool, error) {
	if _, err := conn.ExecContext(ctx, probeSavepoint); err != nil {
		return false, fmt.Errorf("transaction probe: %w", err)
	}
	_, err := conn.ExecContext(ctx, probeRelease)
	var me *mysql.MySQLError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &me) && me.Number == erSavepointDoesNotExist:
		return false, nil
	}
	return false, fmt.Errorf("transaction probe: %w", err)
}

// ownTx is a transaction an enqueue begins for itself on a handle that autocommits.
type ownTx interface {
	DBTX
	Commit() error
	Rollback() error
}

var (
	ctxType       = reflect.TypeOf((*context.Context)(nil)).Elem()
	txOptionsType = reflect.TypeOf((*sql.TxOptions)(nil))
	errorType     = reflect.TypeOf((*error)(nil)).Elem()
)

// beginOwn begins a transaction on h through its BeginTx. database/sql's signature is called
// directly. Any other BeginTx is called by reflection, such as GORM's and bun's. It must take a
// context.Context and a *sql.TxOptions. It must return an error and a value with ExecContext,
// QueryContext, QueryRowContext, Commit and Rollback.
func beginOwn(ctx context.Context, h DBTX) (ownTx, error) {
	if b, ok := h.(interface {
		BeginTx(context.Context, *sql.TxOptions) (*sql.Tx, error)
	}); ok {
		tx, err := b.BeginTx(ctx, nil)
		if err != nil {
			return nil, err
		}
		return tx, nil
	}
	m := reflect.ValueOf(h).MethodByName("BeginTx")
	if !m.IsValid() {
		return nil, fmt.Errorf("%T has no BeginTx method", h)
	}
	mt := m.Type()
	if mt.NumIn() != 2 || mt.In(0) != ctxType || mt.In(1) != txOptionsType || mt.IsVariadic() ||
		mt.NumOut() != 2 || mt.Out(1) != errorType {
		return nil, fmt.Errorf("%T.BeginTx is %s, not func(context.Context, *sql.TxOptions) (T, error)", h, mt)
	}
	out := m.Call([]reflect.Value{reflect.ValueOf(ctx), reflect.Zero(txOptionsType)})
	if err, _ := out[1].Interface().(error); err != nil {
		return nil, err
	}
	tx, ok := out[0].Interface().(ownTx)
	if !ok {
		// Roll back what may have begun, if it can say how.
		if r, ok := out[0].Interface().(interface{ Rollback() error }); ok {
			_ = r.Rollback()
		}
		return nil, fmt.Errorf("%T.BeginTx returned %s, which lacks ExecContext, QueryContext, QueryRowContext, Commit or Rollback", h, out[0].Type())
	}
	return tx, nil
}
