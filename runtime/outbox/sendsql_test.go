package outbox

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"testing"
	"time"
)

// recordingTx is a wrapper of the kind an ORM hands out: it embeds the *sql.Tx (so it has
// Commit) and sees every statement's SQL text, as a statement cache keyed by that text would.
type recordingTx struct {
	*sql.Tx
	mu    sync.Mutex
	texts []string
}

func (r *recordingTx) record(query string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.texts = append(r.texts, query)
}

func (r *recordingTx) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.texts
	r.texts = nil
	return out
}

func (r *recordingTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	r.record(query)
	return r.Tx.ExecContext(ctx, query, args...)
}

func (r *recordingTx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	r.record(query)
	return r.Tx.QueryContext(ctx, query, args...)
}

func (r *recordingTx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	r.record(query)
	return r.Tx.QueryRowContext(ctx, query, args...)
}

// Through a handle that is not database/sql's own, an enqueue's SQL text must not vary with the
// message: a handle that caches a prepared statement per text would otherwise hold one per
// message. Every shape of message (plain, delayed, ordered) is sent twice with different values,
// and both sends must show the same texts; the rows must still hold the values exactly.
func TestEnqueueSQLTextThroughWrapperDoesNotVary(t *testing.T) {
	db := migrated(t)
	ctx := context.Background()
	shapes := []struct {
		name string
		msg  func(i int) (Message, []EnqueueOption)
	}{
		{"plain", func(i int) (Message, []EnqueueOption) {
			return Message{EventType: fmt.Sprintf("type_%d", i), Payload: []byte(fmt.Sprintf(`{"n":%d,"s":"it's ? %d 😀"}`, i, i*7)), IdempotencyKey: fmt.Sprintf("key-%d'?", i)}, nil
		}},
		{"headers", func(i int) (Message, []EnqueueOption) {
			return Message{EventType: "h", Payload: []byte(`{}`)}, []EnqueueOption{Header("trace", fmt.Sprintf("t-%d", i))}
		}},
		{"delayed", func(i int) (Message, []EnqueueOption) {
			return Message{EventType: "d", Payload: []byte(fmt.Sprintf(`[%d]`, i)), MaxAttempts: 3 + i}, []EnqueueOption{Delay(time.Duration(i+1) * time.Hour)}
		}},
		{"ordered", func(i int) (Message, []EnqueueOption) {
			return Message{EventType: "o", Payload: []byte(fmt.Sprintf(`{"i":%d}`, i)), OrderingKey: fmt.Sprintf("order-%d", i)}, nil
		}},
	}
	for _, s := range shapes {
		t.Run(s.name, func(t *testing.T) {
			var texts [2][]string
			var ids [2]MessageID
			var msgs [2]Message
			for i := range 2 {
				sqlTx, err := db.BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				rec := &recordingTx{Tx: sqlTx}
				m, opts := s.msg(i)
				msgs[i] = m
				if ids[i], err = Enqueue(ctx, rec, m, opts...); err != nil {
					t.Fatalf("message %d: %v", i, err)
				}
				texts[i] = rec.take()
				if err := sqlTx.Commit(); err != nil {
					t.Fatal(err)
				}
			}
			if len(texts[0]) == 0 {
				t.Fatal("the wrapper saw no statement")
			}
			if fmt.Sprint(texts[0]) != fmt.Sprint(texts[1]) {
				t.Errorf("the SQL text varies with the message:\nfirst:  %q\nsecond: %q", texts[0], texts[1])
			}
			for i, id := range ids {
				r := getRow(t, db, id)
				if r.EventType != msgs[i].EventType || r.Payload != string(msgs[i].Payload) || r.Key != msgs[i].IdempotencyKey {
					t.Errorf("message %d stored (%q, %q, %q), want (%q, %q, %q)", i, r.EventType, r.Payload, r.Key, msgs[i].EventType, msgs[i].Payload, msgs[i].IdempotencyKey)
				}
			}
		})
	}
}

// On a plain *sql.Tx the enqueue stays one statement in the text protocol: one INSERT, nothing
// prepared or executed as a prepared statement, nothing else sent.
func TestEnqueueOnSQLTxIsOneStatement(t *testing.T) {
	db := migrated(t)
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	counters := []string{"Com_insert", "Com_stmt_prepare", "Com_stmt_execute", "Com_select", "Com_set_option"}
	read := func() map[string]int {
		m := map[string]int{}
		for _, c := range counters {
			m[c] = sessionStatus(t, tx, c)
		}
		return m
	}
	before := read()
	if _, err := Enqueue(ctx, tx, Message{EventType: "one", Payload: []byte(`{"a":"b"}`), IdempotencyKey: "k"}); err != nil {
		t.Fatal(err)
	}
	after := read()
	want := map[string]int{"Com_insert": 1}
	for _, c := range counters {
		if d := after[c] - before[c]; d != want[c] {
			t.Errorf("%s went up by %d during Enqueue on a *sql.Tx, want %d", c, d, want[c])
		}
	}
}
