package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/internal/testutil"
)

// Headers are stored with the row, delivered in Delivery.Headers, shown by Inspect, and survive
// a retry by an operator and a reclaim.
func TestHeadersTravelWithTheMessage(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	want := map[string]string{"tenant": "acme", "X-Request-Id": "r-1", "note": "café ✓"}
	var id MessageID
	err := InTx(ctx, db.DB, func(tx *sql.Tx) error {
		var err error
		id, err = Enqueue(ctx, tx, Message{EventType: "hdr", Payload: json.RawMessage(`{}`), MaxAttempts: 1},
			Header("tenant", "acme"), Header("X-Request-Id", "r-0"), Header("X-Request-Id", "r-1"), Header("note", "café ✓"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if rec, err := Inspect(ctx, db, id); err != nil || !maps.Equal(rec.Headers, want) {
		t.Fatalf("Inspect headers = %v, %v; want %v", rec.Headers, err, want)
	}
	var mu sync.Mutex
	var got []map[string]string
	fail := true
	r := NewRouter()
	r.Handle("hdr", Policy{MaxAttempts: 1}, func(_ context.Context, _ json.RawMessage, d Delivery) error {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, d.Headers)
		if fail {
			fail = false
			return errors.New("first delivery fails")
		}
		return nil
	})
	stop := start(t, newTestWorker(t, db.DB, r, Config{}))
	testutil.Eventually(t, 10*time.Second, "FAILED after one attempt", func() bool { return statusOf(t, db, id) == "FAILED" })
	if n, err := Retry(ctx, db, Filter{IDs: []MessageID{id}}); err != nil || n != 1 {
		t.Fatalf("Retry = %d, %v", n, err)
	}
	testutil.Eventually(t, 10*time.Second, "SENT after Retry", func() bool { return statusOf(t, db, id) == "SENT" })
	stop()
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 || !maps.Equal(got[0], want) || !maps.Equal(got[1], want) {
		t.Errorf("handler saw headers %v, want %v twice (first delivery and after Retry)", got, want)
	}

	// A reclaimed row keeps its headers too.
	ids := enqueueN(t, db.DB, "plain", 1, Header("k", "v"))
	db.MustExec(t, "UPDATE outbox_messages SET status='PROCESSING', attempts=1, claim_token='x', claimed_at=UTC_TIMESTAMP(6) - INTERVAL 10 SECOND, reclaim_after=UTC_TIMESTAMP(6) - INTERVAL 1 SECOND WHERE id = ?", int64(ids[0]))
	w := newTestWorker(t, db.DB, r, Config{})
	if n, err := w.reclaimOnce(ctx); err != nil || n != 1 {
		t.Fatalf("reclaimOnce = %d, %v", n, err)
	}
	if rec, err := Inspect(ctx, db, ids[0]); err != nil || rec.Headers["k"] != "v" || rec.Status != StatusPending {
		t.Errorf("after reclaim: %s, headers %v, %v; want PENDING with k=v", rec.Status, rec.Headers, err)
	}
	// A message without headers has none.
	plain := enqueueN(t, db.DB, "plain", 1)[0]
	if rec, _ := Inspect(ctx, db, plain); rec.Headers != nil {
		t.Errorf("headers of a message enqueued without any: %v, want nil", rec.Headers)
	}
}

// Header text is attacker-controlled (a request id from a client, say): what could break a row,
// a log line or a broker header is refused with the header named, and nothing is written.
func TestHostileHeadersAreRefused(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	many := make([]EnqueueOption, MaxHeaders+1)
	for i := range many {
		many[i] = Header("h"+itoa(i), "v")
	}
	cases := []struct {
		name string
		opts []EnqueueOption
		want string
	}{
		{"newline in a value", []EnqueueOption{Header("x-request-id", "a\r\nX-Admin: 1")}, `header "x-request-id": value contains CR, LF or NUL`},
		{"invalid UTF-8", []EnqueueOption{Header("k", "\xff")}, `header "k": value is not valid UTF-8`},
		{"huge value", []EnqueueOption{Header("k", strings.Repeat("x", 5000))}, `header "k": value of 5000 bytes, at most 4096`},
		{"key with a space", []EnqueueOption{Header("bad key", "v")}, `header key "bad key"`},
		{"empty key", []EnqueueOption{Header("", "v")}, `header key ""`},
		{"reserved prefix", []EnqueueOption{Header("Outbox-Attempt", "1")}, `the "outbox-" prefix is reserved`},
		{"too many", many, "65 headers, at most 64"},
	}
	for _, c := range cases {
		err := InTx(ctx, db.DB, func(tx *sql.Tx) error {
			_, err := Enqueue(ctx, tx, Message{EventType: "hostile", Payload: json.RawMessage(`{}`)}, c.opts...)
			return err
		})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want it to contain %q", c.name, err, c.want)
		}
	}
	if n := countRows(t, db, "1=1"); n != 0 {
		t.Errorf("%d rows written by refused enqueues, want 0", n)
	}
}

type hookKey struct{}

// An enqueue hook adds headers from the context (what runtime/outboxotel does with the trace
// context), and the caller's own Header wins on the same key; middleware wraps every handler
// call, first entry outermost, and sees the Delivery and the handler's error.
func TestEnqueueHookAndMiddleware(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	// Process-wide: it acts only on contexts of this test.
	t.Cleanup(AddEnqueueHook(func(ctx context.Context, eventType string, h map[string]string) {
		if v, ok := ctx.Value(hookKey{}).(string); ok {
			h["traceparent"] = v
			h["who"] = "hook"
		}
	}))
	ctx := context.WithValue(context.Background(), hookKey{}, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	var id MessageID
	err := InTx(ctx, db.DB, func(tx *sql.Tx) error {
		var err error
		id, err = Enqueue(ctx, tx, Message{EventType: "mw", Payload: json.RawMessage(`{}`), MaxAttempts: 1}, Header("who", "caller"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var order []string
	var seen Delivery
	var seenErr error
	mw := func(name string) Middleware {
		return func(next HandlerFunc) HandlerFunc {
			return func(ctx context.Context, p json.RawMessage, d Delivery) error {
				mu.Lock()
				order = append(order, name+" in")
				mu.Unlock()
				err := next(ctx, p, d)
				mu.Lock()
				order = append(order, name+" out")
				if name == "outer" {
					seen, seenErr = d, err
				}
				mu.Unlock()
				return err
			}
		}
	}
	r := NewRouter()
	r.Handle("mw", Policy{MaxAttempts: 1}, func(context.Context, json.RawMessage, Delivery) error {
		mu.Lock()
		order = append(order, "handler")
		mu.Unlock()
		return Permanent(errors.New("no"))
	})
	stop := start(t, newTestWorker(t, db.DB, r, Config{Middleware: []Middleware{mw("outer"), mw("inner")}}))
	testutil.Eventually(t, 10*time.Second, "FAILED", func() bool { return statusOf(t, db, id) == "FAILED" })
	stop()
	mu.Lock()
	defer mu.Unlock()
	if got := strings.Join(order, ","); got != "outer in,inner in,handler,inner out,outer out" {
		t.Errorf("middleware order %s", got)
	}
	if seen.Headers["traceparent"] == "" || seen.Headers["who"] != "caller" || seen.MaxAttempts != 1 || seen.Attempt != 1 {
		t.Errorf("middleware saw %+v, want the hook's traceparent, who=caller, attempt 1 of 1", seen)
	}
	if !IsPermanent(seenErr) {
		t.Errorf("middleware saw error %v, want the handler's Permanent error", seenErr)
	}
}

// A Worker wraps each handler in Config.Middleware once, when it is built: the outer function
// of a middleware runs once per event type, its handler once per call. (Wrapping at every call
// cost each message an allocation per middleware.)
func TestMiddlewareWrapsOncePerEventType(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	var wraps, calls atomic.Int64
	count := func(next HandlerFunc) HandlerFunc {
		wraps.Add(1)
		return func(ctx context.Context, p json.RawMessage, d Delivery) error {
			calls.Add(1)
			return next(ctx, p, d)
		}
	}
	r := NewRouter()
	for _, typ := range []string{"a", "b"} {
		r.Handle(typ, Policy{}, func(context.Context, json.RawMessage, Delivery) error { return nil })
	}
	w := newTestWorker(t, db.DB, r, Config{Middleware: []Middleware{count}})
	if n := wraps.Load(); n != 2 {
		t.Fatalf("NewWorker wrapped %d handlers, want 2 (one per event type)", n)
	}
	enqueueN(t, db.DB, "a", 20)
	enqueueN(t, db.DB, "b", 20)
	stop := start(t, w)
	testutil.Eventually(t, 10*time.Second, "40 handler calls", func() bool { return calls.Load() == 40 })
	stop()
	if n := wraps.Load(); n != 2 {
		t.Errorf("after 40 handler calls the middleware wrapped %d times, want still 2", n)
	}
}

// A middleware that cannot wrap a handler (nil, returning nil, panicking) is refused by
// NewWorker, naming it and the event, instead of failing at the first message.
func TestNewWorkerRefusesABrokenMiddleware(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	pass := func(next HandlerFunc) HandlerFunc { return next }
	for _, c := range []struct {
		name string
		mw   Middleware
		want string
	}{
		{"nil", nil, "nil middleware"},
		{"returns nil", func(HandlerFunc) HandlerFunc { return nil }, "returned a nil handler"},
		{"panics", func(HandlerFunc) HandlerFunc { panic("no tenant configured") }, "panic: no tenant configured"},
	} {
		r := NewRouter()
		r.Handle("welcome_email", Policy{}, func(context.Context, json.RawMessage, Delivery) error { return nil })
		_, err := NewWorker(db.DB, r, Config{Middleware: []Middleware{pass, c.mw}})
		if err == nil || !strings.Contains(err.Error(), `event "welcome_email": Config.Middleware[1]`) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: NewWorker error %v, want it to name event \"welcome_email\", Config.Middleware[1] and %q", c.name, err, c.want)
		}
	}
}

// decodeHeadersJSON is what decodeHeaders must return for every column: encoding/json's
// reading, with nil for anything that does not decode to a non-empty object of strings.
func decodeHeadersJSON(s string) map[string]string {
	var h map[string]string
	if json.Unmarshal([]byte(s), &h) != nil || len(h) == 0 {
		return nil
	}
	return h
}

const traceHeaders = `{"baggage":"tenant=acme","traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}`

// decodeHeaders' fast path reads what encodeHeaders writes for plain ASCII headers, and
// anything else goes to encoding/json: the result is encoding/json's either way.
func TestDecodeHeadersMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	cases := []struct {
		column string
		plain  bool // read by the fast path, without encoding/json
	}{
		{traceHeaders, true},
		{`{"k":"v"}`, true},
		{`{"":""}`, true},
		{`{"k":"a","k":"b"}`, true}, // the last value wins
		{`{"tracestate":"a=b,c=d","x":"{\"}"}`, false},
		{`{"k":"caf\u00e9"}`, false},
		{`{"k":"café ✓"}`, false},
		{`{"k":"\xff"}`, false},
		{`{"k":"\u003c\u0026\u003e"}`, false}, // json.Marshal's HTML escapes
		{`{"k":"a\u2028b"}`, false},
		{`{"k":"\ud800"}`, false},
		{"{\"k\":\"tab\t\"}", false},
		{`{"k":"del` + "\x7f" + `"}`, false},
		{`{"k":null}`, false},
		{`{"k":1}`, false},
		{`{"k":"v","n":2}`, false},
		{`{"k":["v"]}`, false},
		{`{"k":"v",}`, false},
		{`{"k":"v"}}`, false},
		{`{"k":"v"}x}`, false},
		{`{"k":"v"} `, false},
		{` {"k":"v"}`, false},
		{`{ "k": "v" }`, false},
		{`{"k" :"v"}`, false},
		{`{"k":"v""j":"w"}`, false},
		{`{"k":"v",,"j":"w"}`, false},
		{`{"k""v"}`, false},
		{`{"k":"v}`, false},
		{`{"k:"v"}`, false},
		{`{k:"v"}`, false},
		{`{"k":}`, false},
		{`{}`, false},
		{`null`, false},
		{`"k"`, false},
		{`[]`, false},
		{`{`, false},
		{`}`, false},
		{`{"a":"b"}{"c":"d"}`, false},
	}
	for _, c := range cases {
		got, want := decodeHeaders(c.column), decodeHeadersJSON(c.column)
		if !maps.Equal(got, want) || (got == nil) != (want == nil) {
			t.Errorf("decodeHeaders(%#q) = %#v, want encoding/json's %#v", c.column, got, want)
		}
		if _, ok := decodePlainHeaders(c.column); ok != c.plain {
			t.Errorf("decodePlainHeaders(%#q) ok = %v, want %v", c.column, ok, c.plain)
		}
	}
	// What encodeHeaders writes for plain headers takes the fast path.
	column, err := encodeHeaders(map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "tracestate": "a=b,c=d", "X-Request-Id": "r-1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := decodePlainHeaders(column); !ok {
		t.Errorf("decodePlainHeaders(%#q) ok = false, want the fast path for encodeHeaders' output", column)
	}
}

// FuzzDecodeHeaders compares decodeHeaders with encoding/json on any column text:
// go test -run xxx -fuzz FuzzDecodeHeaders ./runtime/outbox/
func FuzzDecodeHeaders(f *testing.F) {
	for _, s := range []string{traceHeaders, `{"k":"v"}`, `{"k":"a","k":"b"}`, `{"k":"\u00e9"}`, `{"k":1}`, `{"k":"v",}`, `{}`, `{"":""}`, `{"k":"v"} `, "{\"k\":\"\xff\"}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, column string) {
		got, want := decodeHeaders(column), decodeHeadersJSON(column)
		if !maps.Equal(got, want) || (got == nil) != (want == nil) {
			t.Errorf("decodeHeaders(%#q) = %#v, want encoding/json's %#v", column, got, want)
		}
	})
}

// The worker decodes every claimed row's headers before dispatch; with runtime/outboxotel
// wired, every row carries a trace context.
func BenchmarkDecodeHeaders(b *testing.B) {
	for _, c := range []struct{ name, column string }{
		{"trace", traceHeaders},
		{"escaped", `{"note":"caf\u00e9","traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}`},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if decodeHeaders(c.column) == nil {
					b.Fatal("no headers")
				}
			}
		})
	}
}

type removedHookKey struct{}

// The function AddEnqueueHook returns unregisters that hook alone, and may be called twice.
func TestEnqueueHookRemoved(t *testing.T) {
	t.Parallel()
	hook := func(v string) EnqueueHook {
		return func(ctx context.Context, _ string, h map[string]string) {
			if ctx.Value(removedHookKey{}) != nil {
				h["hook-"+v] = v
			}
		}
	}
	removeA := AddEnqueueHook(hook("a"))
	removeB := AddEnqueueHook(hook("b"))
	t.Cleanup(removeB)
	ctx := context.WithValue(context.Background(), removedHookKey{}, true)
	got, err := headersOf(ctx, "e", nil)
	if err != nil || got["hook-a"] != "a" || got["hook-b"] != "b" {
		t.Fatalf("with both hooks: %v, %v; want both headers", got, err)
	}
	removeA()
	removeA()
	got, err = headersOf(ctx, "e", nil)
	if err != nil || len(got) != 1 || got["hook-b"] != "b" {
		t.Errorf("after removing a: %v, %v; want b's header alone", got, err)
	}
}

// A hook carried by a context runs for enqueues in that context only, after the hooks of its
// parent; sibling contexts do not share their hooks.
func TestEnqueueHookOfTheContext(t *testing.T) {
	t.Parallel()
	set := func(k, v string) EnqueueHook {
		return func(_ context.Context, _ string, h map[string]string) { h[k] = v }
	}
	parent := WithEnqueueHook(context.Background(), set("tenant", "parent"))
	a := WithEnqueueHook(parent, set("tenant", "a"))
	b := WithEnqueueHook(parent, set("world", "b"))
	for _, c := range []struct {
		name string
		ctx  context.Context
		want string
	}{
		{"background", context.Background(), "{}"},
		{"parent", parent, `{"tenant":"parent"}`},
		{"a", a, `{"tenant":"a"}`},
		{"b", b, `{"tenant":"parent","world":"b"}`},
	} {
		h, err := headersOf(c.ctx, "e", nil)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got, _ := json.Marshal(h)
		if string(got) != c.want && !(c.want == "{}" && h == nil) {
			t.Errorf("%s: headers %s, want %s", c.name, got, c.want)
		}
	}
}
