package outboxtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/outboxgen/outboxgen/runtime/internal/store"
	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// decoder is what Enqueued needs of *T: outboxgen generates it for every outbox event.
type decoder interface {
	DecodeOutboxPayload(payload []byte) error
}

// Enqueued returns the messages of T's event type that db sees, in enqueue order, each decoded
// as the worker decodes it for T's handler (a payload its handler would refuse fails tb). It
// reads through db, so on the test's *sql.Tx it sees the test's uncommitted messages; on a pool
// it sees the committed ones. Every status counts: a message already sent is still enqueued.
// T is a payload type that outboxgen generated for an outbox event (a direct event is never
// enqueued); any other fails tb.
func Enqueued[T outbox.Event](tb testing.TB, db outbox.DBTX) []T {
	tb.Helper()
	out, _ := enqueued[T](tb, db)
	return out
}

// enqueued is Enqueued, with each message's id.
func enqueued[T outbox.Event](tb testing.TB, db outbox.DBTX) ([]T, []int64) {
	tb.Helper()
	var zero T
	if _, ok := any(&zero).(decoder); !ok {
		tb.Fatalf("outboxtest: %T has no DecodeOutboxPayload method: it is not a payload type that this outboxgen generated for an outbox event (regenerate with outboxgen generate)", zero)
		return nil, nil
	}
	eventType := zero.EventType()
	rows, err := store.New().TestkitMessagesByType(context.Background(), noPrepare{db}, eventType)
	if err != nil {
		tb.Fatalf("outboxtest: read %q messages: %v", eventType, err)
		return nil, nil
	}
	out := make([]T, 0, len(rows))
	ids := make([]int64, 0, len(rows))
	for _, r := range rows {
		var v T
		if err := any(&v).(decoder).DecodeOutboxPayload(r.Payload); err != nil {
			tb.Fatalf("outboxtest: message %d (%q) does not decode as %T: %v", r.ID, eventType, v, err)
			return nil, nil
		}
		out = append(out, v)
		ids = append(ids, r.ID)
	}
	return out, ids
}

// RequireEnqueued fails tb unless one of the messages of want's event type that db sees
// (Enqueued) equals want field by field: nil and empty slices and maps are equal, and so are
// values whose type has an Equal method that says so (time.Time). The failure shows, for each
// message, the fields that differ, with both values.
func RequireEnqueued[T outbox.Event](tb testing.TB, db outbox.DBTX, want T) {
	tb.Helper()
	got, ids := enqueued[T](tb, db)
	if len(got) == 0 {
		tb.Fatalf("outboxtest: no %q message was enqueued; want %s", want.EventType(), show(want))
		return
	}
	var b strings.Builder
	for i, g := range got {
		d := diff(g, want)
		if len(d) == 0 {
			return
		}
		if i == maxShown {
			fmt.Fprintf(&b, "\n(and %d more)", len(got)-maxShown)
			break
		}
		fmt.Fprintf(&b, "\nmessage %d differs in %d field(s):", ids[i], len(d))
		for _, line := range d {
			b.WriteString("\n    " + line)
		}
	}
	tb.Fatalf("outboxtest: none of the %d %q messages enqueued equals want (got the first value, want the second):%s", len(got), want.EventType(), b.String())
}

// maxShown bounds the messages whose differences RequireEnqueued prints.
const maxShown = 5

// noPrepare lets the store's queries run on an outbox.DBTX, which has no PrepareContext (the
// kit's queries never prepare). Reset writes through it too.
type noPrepare struct{ outbox.DBTX }

func (noPrepare) PrepareContext(context.Context, string) (*sql.Stmt, error) {
	return nil, errors.New("outboxtest: PrepareContext is not supported")
}
