package outbox

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestInspect(t *testing.T) {
	db := migrated(t)
	ctx := context.Background()
	id, err := Enqueue(ctx, db, Message{EventType: "inspect_me", Payload: []byte(`{"a":1}`), IdempotencyKey: "k1", MaxAttempts: 4}, Standalone())
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("line of a long error\n", 40)
	setRow(t, db, id, failedSQL, long, -5)
	r, err := Inspect(ctx, db, id)
	if err != nil {
		t.Fatal(err)
	}
	if r.ID != id || r.EventType != "inspect_me" || string(r.Payload) != `{"a":1}` || r.IdempotencyKey != "k1" ||
		r.Status != StatusFailed || r.Attempts != 4 || r.MaxAttempts != 4 || r.LastError != long ||
		r.FailedAt.IsZero() || !r.SentAt.IsZero() || r.CreatedAt.IsZero() || r.NextAttemptAt.IsZero() {
		t.Fatalf("Inspect = %+v", r)
	}
	if _, err := Inspect(ctx, db, id+1000); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Inspect(missing) err = %v, want ErrNotFound", err)
	}
}
