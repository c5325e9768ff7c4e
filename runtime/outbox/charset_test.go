package outbox

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/internal/testutil"
)

// TestConnectionCharsetKeepsBytes runs the whole path (enqueue, claim, handler, result, Inspect,
// ListFailed) on pools whose DSN names a charset narrower than utf8mb4 (and utf8mb4 itself). The server converts text
// columns of a result set to the connection's charset, which turns an emoji into '?': every read
// of payload, headers and last_error must come back byte for byte all the same.
func TestConnectionCharsetKeepsBytes(t *testing.T) {
	for _, cs := range []string{"utf8", "utf8mb3", "latin1", "ascii", "utf8&interpolateParams=true", "utf8mb4"} {
		t.Run(cs, func(t *testing.T) {
			d := migrated(t)
			db, err := sql.Open("mysql", d.DSN+"&charset="+cs)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			var got string
			if err := db.QueryRow("SELECT @@character_set_results").Scan(&got); err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(got, "utf8mb4") != (cs == "utf8mb4") {
				t.Fatalf("character_set_results is %s: the DSN's charset %s did not take", got, cs)
			}
			ctx := context.Background()
			small := []byte(`{"e":"😀","s":"日本語 ünï"}`)
			// Past the inline limit, the INSERT sends the payload as a statement argument.
			large := []byte(`{"e":"😀","pad":"` + strings.Repeat("é😀", maxInlineBytes/4) + `"}`)
			want := map[MessageID][]byte{}
			// A handle of another type (an ORM's) gets the values as statement arguments.
			for i := range 5 {
				p := small
				if i == 1 {
					p = large
				}
				m := Message{EventType: "cs_ok_é😀", Payload: p, IdempotencyKey: "idem-😀-" + itoa(i)}
				if i == 2 || i == 4 {
					m.OrderingKey = "order-é😀"
				}
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				var h DBTX = tx
				switch i {
				case 3:
					h = wrappedPool{db}
				case 4:
					h = wrappedTx{tx}
				}
				id, err := Enqueue(ctx, h, m, Standalone(), Header("x-note", "héllo 😀"))
				if err != nil {
					t.Fatalf("Enqueue %d bytes on %T: %v", len(p), h, err)
				}
				if err := tx.Commit(); err != nil {
					t.Fatal(err)
				}
				want[id] = p
			}
			failID, err := Enqueue(ctx, db, Message{EventType: "cs_fail", Payload: small, MaxAttempts: 1}, Standalone())
			if err != nil {
				t.Fatal(err)
			}
			const handlerErr = "provider said: 😀 nope ünï"

			var mu sync.Mutex
			seen := map[MessageID][]byte{}
			r := NewRouter()
			r.Handle("cs_ok_é😀", Policy{}, func(_ context.Context, p json.RawMessage, dl Delivery) error {
				mu.Lock()
				defer mu.Unlock()
				seen[dl.MessageID] = bytes.Clone(p)
				if !strings.HasPrefix(dl.IdempotencyKey, "idem-😀-") {
					return Permanent(errors.New("idempotency key came back as " + dl.IdempotencyKey))
				}
				if dl.Headers["x-note"] != "héllo 😀" {
					return Permanent(errors.New("header came back as " + dl.Headers["x-note"]))
				}
				return nil
			})
			r.Handle("cs_fail", Policy{}, func(context.Context, json.RawMessage, Delivery) error {
				return Permanent(errors.New(handlerErr))
			})
			w := newTestWorker(t, db, r, Config{})
			stop := start(t, w)
			testutil.Eventually(t, 30*time.Second, "every message finished", func() bool {
				return countRows(t, d, "status IN ('SENT','FAILED')") == 6
			})
			stop()

			for id, p := range want {
				if !bytes.Equal(seen[id], p) {
					t.Errorf("message %d: the handler got %d bytes %.40q..., want %d bytes %.40q...", id, len(seen[id]), seen[id], len(p), p)
				}
				if st := statusOf(t, d, id); st != "SENT" {
					t.Errorf("message %d is %s, want SENT (%s)", id, st, getRow(t, d, id).LastError.String)
				}
				rec, err := Inspect(ctx, db, id)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(rec.Payload, p) || rec.Headers["x-note"] != "héllo 😀" || !strings.HasPrefix(rec.IdempotencyKey, "idem-😀-") {
					t.Errorf("Inspect %d: payload %.40q..., headers %q", id, rec.Payload, rec.Headers)
				}
			}
			rec, err := Inspect(ctx, db, failID)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(rec.LastError, handlerErr) {
				t.Errorf("Inspect: last_error %q, want it to hold %q", rec.LastError, handlerErr)
			}
			failed, err := ListFailed(ctx, db, Filter{}, 10)
			if err != nil {
				t.Fatal(err)
			}
			if len(failed) != 1 || !bytes.Equal(failed[0].Payload, small) || !strings.Contains(failed[0].LastError, handlerErr) {
				t.Errorf("ListFailed: %+v", failed)
			}
		})
	}
}

// wrappedPool and wrappedTx are handles of types other than database/sql's, as an ORM's are.
type (
	wrappedPool struct{ *sql.DB }
	wrappedTx   struct{ *sql.Tx }
)
