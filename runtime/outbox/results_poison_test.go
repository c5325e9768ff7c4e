package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/outboxgen/outboxgen/internal/testutil"
)

// A handler error quoting a binary or Latin-1 body (invalid UTF-8) used to fail the last_error
// write with error 1300, rolling back the whole batch of results: every good message of the
// batch was redelivered after the lease and the real error was lost. Now the text is made
// valid for its column, and the good messages are SENT once.
func TestInvalidUTF8ErrorDoesNotPoisonTheBatch(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	c := newCalls()
	r := NewRouter()
	r.Handle("good", Policy{}, func(_ context.Context, p json.RawMessage, d Delivery) error { c.add(d, p); return nil })
	r.Handle("binary_error", Policy{}, func(_ context.Context, p json.RawMessage, d Delivery) error {
		c.add(d, p)
		return Permanent(fmt.Errorf("provider said: %s", "\xff\xfe body \xc3"))
	})
	good := enqueueN(t, db.DB, "good", 20)
	bad := enqueueN(t, db.DB, "binary_error", 1)[0]
	stop := start(t, newTestWorker(t, db.DB, r, fastConfig(Config{StaleAfter: 3 * time.Minute})))
	testutil.Eventually(t, 10*time.Second, "20 SENT and 1 FAILED", func() bool {
		return countRows(t, db, "status='SENT'") == 20 && countRows(t, db, "status='FAILED'") == 1
	})
	stop()
	for _, id := range good {
		if n := c.of(id); n != 1 {
			t.Errorf("good message %d handled %d times, want 1", id, n)
		}
	}
	le := getRow(t, db, bad).LastError.String
	if want := "attempt 1: permanent: provider said: \uFFFD body \uFFFD"; le != want {
		t.Errorf("last_error = %q, want %q (the real error, invalid bytes replaced)", le, want)
	}
}

// One result whose write the server refuses must not take the batch's other results with it.
// The fault driver refuses the write of one row, as a column would refuse a value.
func TestOneRefusedWriteKeepsTheOthers(t *testing.T) {
	t.Parallel()
	d, inj, db := faultyDB(t)
	r := NewRouter()
	r.Handle("ok", Policy{}, func(context.Context, json.RawMessage, Delivery) error { return nil })
	r.Handle("retry", Policy{}, func(context.Context, json.RawMessage, Delivery) error { return errors.New("later") })
	w := newTestWorker(t, db, r, Config{})
	ctx := context.Background()
	enqueueN(t, d.DB, "ok", 10)
	enqueueN(t, d.DB, "retry", 1)
	got, _, err := w.claim(ctx, 11, claimPos{})
	if err != nil || len(got) != 11 {
		t.Fatalf("claim: %d, %v", len(got), err)
	}
	var batch []result
	for _, m := range got {
		batch = append(batch, w.handle(ctx, m))
	}
	refuse := inj.Fail(`SET status\s+= IF\(cancelled_at IS NULL, 'PENDING', 'CANCELLED'\),\s+next_attempt_at`, errors.New("Error 1366: Incorrect string value"))
	written, _ := w.writeResultsUntil(ctx, batch, time.Now().Add(300*time.Millisecond), func() bool { return false })
	refuse.Remove()
	if written != 10 {
		t.Errorf("written = %d, want the 10 SENT results despite the one refused write", written)
	}
	if n := countRows(t, d, "status='SENT'"); n != 10 {
		t.Errorf("%d rows SENT, want 10", n)
	}
	if n := countRows(t, d, "status='PROCESSING'"); n != 1 {
		t.Errorf("%d rows PROCESSING, want 1 (the refused one, left for the reclaim)", n)
	}
}

func TestTruncateKeepsTextValid(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"plain", 100, "plain"},
		{"bad \xff byte", 100, "bad \uFFFD byte"},
		// The mark takes 15 bytes: 5 are left, two é and half of a third, which goes.
		{strings.Repeat("é", 20), 20, "éé …(truncated)"},
		{strings.Repeat("日", 10), 19, "日 …(truncated)"},
		{"\xff" + strings.Repeat("a", 30), 20, "\uFFFDaa …(truncated)"},
	} {
		got := truncate(c.in, c.n)
		if got != c.want || !utf8.ValidString(got) || len(got) > c.n {
			t.Errorf("truncate(%q, %d) = %q, want %q (valid UTF-8, at most %d bytes)", c.in, c.n, got, c.want, c.n)
		}
	}
}
