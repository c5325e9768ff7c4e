package outbox

import (
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
)

// The hex literal writer encodes through a fixed buffer: strings longer than it, and of every
// length around its edges, must come out whole.
func TestInlineArgsHexOfEveryLength(t *testing.T) {
	t.Parallel()
	src := make([]byte, 1500)
	for i := range src {
		src[i] = byte(i * 7)
	}
	for n := 0; n <= len(src); n++ {
		v := src[:n]
		want := "X'" + hex.EncodeToString(v) + "'"
		got, err := inlineArgs("?,?,?", []any{string(v), v, json.RawMessage(v)})
		if err != nil || got != strings.Join([]string{want, want, want}, ",") {
			t.Fatalf("%d bytes: inlineArgs = %.80q..., %v; want %.80q... three times", n, got, err, want)
		}
		if size := inlineSize("?,?,?", []any{string(v), v, json.RawMessage(v)}); size < len(got) {
			t.Fatalf("%d bytes: inlineSize = %d, under the statement's %d", n, size, len(got))
		}
	}
}
