package outboxent

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"

	"github.com/outboxgen/outboxgen/runtime/outbox"
)

type client struct{}

func (client) ExecContext(context.Context, string, ...any) (sql.Result, error) {
	return nil, errors.New("client: no statement expected")
}
func (client) QueryContext(context.Context, string, ...any) (*sql.Rows, error) {
	return nil, errors.New("client: no statement expected")
}

type tx struct{ client }

func (tx) Commit() error   { return nil }
func (tx) Rollback() error { return nil }

// A handle without Commit is a pool to Enqueue (refused before any statement); QueryRowContext,
// which Enqueue never calls, gives a row whose Scan says it is not supported.
func TestTx(t *testing.T) {
	ctx := context.Background()
	_, err := outbox.Enqueue(ctx, Tx(client{}), outbox.Message{EventType: "e", Payload: []byte(`{}`)})
	if err == nil || !strings.Contains(err.Error(), "Standalone()") {
		t.Errorf("Enqueue on a client: err = %v, want the refusal naming Standalone()", err)
	}
	for _, h := range []outbox.DBTX{Tx(client{}), Tx(tx{})} {
		if err := h.QueryRowContext(ctx, "SELECT 1").Scan(new(int)); !errors.Is(err, errNoQueryRow) {
			t.Errorf("%T: QueryRowContext(...).Scan = %v, want %v", h, err, errNoQueryRow)
		}
	}
	if _, ok := Tx(tx{}).(interface{ Commit() error }); !ok {
		t.Error("Tx of a transaction has no Commit: Enqueue would take it for a pool")
	}
}
