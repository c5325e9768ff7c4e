// Headers are string metadata that travels with a message, such as a trace context, a tenant
// or a request id. Enqueue hooks let an integration such as runtime/outboxotel add headers, so
// that the core imports no tracing library.

package outbox

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"
)

// Header limits, checked at enqueue.
//   - A message carries at most MaxHeaders headers.
//   - A key is 1 to 128 bytes of letters, digits and - _ . and colon. It has no
//     space and no control character, because it becomes a NATS or Kafka header name.
//   - A value is valid UTF-8 of at most 4096 bytes without CR, LF or NUL. It
//     must not be able to forge another header or a log line.
//   - All headers together take at most 16 KiB.
const (
	MaxHeaders          = 64
	maxHeaderKeyBytes   = 128
	maxHeaderValueBytes = 4096
	maxHeadersBytes     = 16 << 10
)

// Reserved header prefixes. "outbox-" is the runtime's own. runtime/outboxotel writes the W3C
// trace context keys traceparent, tracestate and baggage. Setting them by hand is allowed but
// competes with it.
const ReservedHeaderPrefix = "outbox-"

var headerKey = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]*$`)

// Header adds a header to the message. It is stored with the row, given to the handler as
// Delivery.Headers, shown by `outboxgen show`, and carried by the relays as broker headers.
// The same key twice keeps the last value. Invalid keys and values make Enqueue fail, naming
// the header. MaxHeaders lists the limits. Keys starting with ReservedHeaderPrefix are refused.
func Header(key, value string) EnqueueOption {
	return func(o *enqueueOptions) {
		if o.headers == nil {
			o.headers = map[string]string{}
		}
		o.headers[key] = value
	}
}

// EnqueueHook adds headers to a message being enqueued in ctx, such as the trace context of
// the enqueuing span. It must not block. Headers it sets are validated like Header's.
type EnqueueHook func(ctx context.Context, eventType string, headers map[string]string)

var (
	hooksMu      sync.RWMutex
	enqueueHooks []*EnqueueHook // replaced, never changed in place, because headersOf reads it unlocked
)

// AddEnqueueHook registers h for every Enqueue of this process. The process-wide hooks run in
// registration order, before the hooks of the context from WithEnqueueHook. The caller's own
// Header options come last and win on the same key. Call it at startup. Generated EnqueueX
// functions take no configuration, so the hook is process-wide. remove unregisters h, and it
// may be called more than once.
func AddEnqueueHook(h EnqueueHook) (remove func()) {
	p := &h
	hooksMu.Lock()
	defer hooksMu.Unlock()
	enqueueHooks = append(enqueueHooks[:len(enqueueHooks):len(enqueueHooks)], p)
	return func() {
		hooksMu.Lock()
		defer hooksMu.Unlock()
		kept := make([]*EnqueueHook, 0, len(enqueueHooks))
		for _, q := range enqueueHooks {
			if q != p {
				kept = append(kept, q)
			}
		}
		enqueueHooks = kept
	}
}

type ctxHooksKey struct{}

// WithEnqueueHook returns a context whose Enqueue calls run h, after the process-wide hooks and
// the hooks ctx already carries. Its scope is the context. Two parts of one process, such as
// two tests or two tenants, can each have their own hooks.
func WithEnqueueHook(ctx context.Context, h EnqueueHook) context.Context {
	prev, _ := ctx.Value(ctxHooksKey{}).([]EnqueueHook)
	hooks := append(prev[:len(prev):len(prev)], h)
	return context.WithValue(ctx, ctxHooksKey{}, hooks)
}

// headersOf merges the hooks' headers and the options' and checks them. It returns nil when
// there are none.
func headersOf(ctx context.Context, eventType string, given map[string]string) (map[string]string, error) {
	hooksMu.RLock()
	hooks := enqueueHooks
	hooksMu.RUnlock()
	scoped, _ := ctx.Value(ctxHooksKey{}).([]EnqueueHook)
	if len(hooks) == 0 && len(scoped) == 0 && len(given) == 0 {
		return nil, nil
	}
	h := map[string]string{}
	for _, hook := range hooks {
		(*hook)(ctx, eventType, h)
	}
	for _, hook := range scoped {
		hook(ctx, eventType, h)
	}
	for k := range h {
		if strings.HasPrefix(strings.ToLower(k), ReservedHeaderPrefix) {
			return nil, fmt.Errorf("header %q: the %q prefix is reserved", k, ReservedHeaderPrefix)
		}
	}
	for k, v := range given {
		if strings.HasPrefix(strings.ToLower(k), ReservedHeaderPrefix) {
			return nil, fmt.Errorf("header %q: the %q prefix is reserved", k, ReservedHeaderPrefix)
		}
		h[k] = v
	}
	if len(h) == 0 {
		return nil, nil
	}
	if len(h) > MaxHeaders {
		return nil, fmt.Errorf("%d headers, at most %d", len(h), MaxHeaders)
	}
	total := 0
	for k, v := range h {
		total += len(k) + len(v)
		switch {
		case len(k) > maxHeaderKeyBytes || !headerKey.MatchString(k):
			return nil, fmt.Errorf("header key %.140q: want 1 to %d bytes of letters, digits, '-', '_', '.' or ':'", k, maxHeaderKeyBytes)
		case len(v) > maxHeaderValueBytes:
			return nil, fmt.Errorf("header %q: value of %d bytes, at most %d", k, len(v), maxHeaderValueBytes)
		case !utf8.ValidString(v):
			return nil, fmt.Errorf("header %q: value is not valid UTF-8", k)
		case strings.ContainsAny(v, "\r\n\x00"):
			return nil, fmt.Errorf("header %q: value contains CR, LF or NUL", k)
		}
	}
	if total > maxHeadersBytes {
		return nil, fmt.Errorf("headers of %d bytes, at most %d", total, maxHeadersBytes)
	}
	return h, nil
}

// encodeHeaders is the column's JSON object. encoding/json sorts map keys, so it is
// deterministic.
func encodeHeaders(h map[string]string) (string, error) {
	if len(h) == 0 {
		return "", nil
	}
	b, err := json.Marshal(h)
	return string(b), err
}

// decodeHeaders reads the column. A row whose headers do not decode, written by hand, delivers
// none rather than failing the message.
func decodeHeaders(s string) map[string]string {
	if s == "" {
		return nil
	}
	if h, ok := decodePlainHeaders(s); ok {
		return h
	}
	var h map[string]string
	if json.Unmarshal([]byte(s), &h) != nil || len(h) == 0 {
		return nil
	}
	return h
}

// decodePlainHeaders is decodeHeaders' fast path for what encodeHeaders writes in the common
// case, a trace context or a request id. That is an object with no whitespace, no escape and
// only printable ASCII in the strings. encoding/json decodes those to the strings as written.
// ok is false for anything else, which is left to encoding/json. That includes an escape, a
// non-ASCII byte, whitespace, an empty object and invalid JSON.
func decodePlainHeaders(s string) (h map[string]string, ok bool) {
	if len(s) < len(`{"":""}`) || s[0] != '{' || s[len(s)-1] != '}' {
		return nil, false
	}
	// The entries' count when the strings are plain and so hold no quote. It is a hint only,
	// capped for a column written by hand.
	n := min(strings.Count(s, `":"`), MaxHeaders)
	i := 1
	for {
		k, next, ok := plainString(s, i)
		if !ok || next >= len(s) || s[next] != ':' {
			return nil, false
		}
		v, next, ok := plainString(s, next+1)
		if !ok || next >= len(s) {
			return nil, false
		}
		if h == nil {
			h = make(map[string]string, n)
		}
		h[k] = v // a key seen twice keeps the last value, as encoding/json does
		switch s[next] {
		case ',':
			i = next + 1
		case '}':
			if next != len(s)-1 {
				return nil, false
			}
			return h, true
		default:
			return nil, false
		}
	}
}

// plainString reads the JSON string at s[i:] if it is made of printable ASCII without an
// escape, and returns its text and the index after its closing quote.
func plainString(s string, i int) (text string, next int, ok bool) {
	if i >= len(s) || s[i] != '"' {
		return "", 0, false
	}
	for j := i + 1; j < len(s); j++ {
		switch c := s[j]; {
		case c == '"':
			return s[i+1 : j], j + 1, true
		case c == '\\' || c < 0x20 || c > 0x7e:
			return "", 0, false
		}
	}
	return "", 0, false
}
