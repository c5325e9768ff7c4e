package outboxnats

import (
	"bytes"
	"encoding/base64"
	"net/http"
	"testing"

	"github.com/nats-io/nats.go"
)

// throughNATS writes one header the way nats.go puts headers on the wire (Msg.headerBytes:
// "NATS/1.0", net/http's Header.Write, a blank line) and reads it back with nats.go's parser.
// ok is false when the header did not arrive as exactly one line.
func throughNATS(t testing.TB, name, value string) (got string, ok bool) {
	t.Helper()
	var b bytes.Buffer
	b.WriteString("NATS/1.0\r\n")
	if err := http.Header(nats.Header{name: {value}}).Write(&b); err != nil {
		t.Fatalf("write header %q: %v", name, err)
	}
	b.WriteString("\r\n")
	h, err := nats.DecodeHeadersMsg(b.Bytes())
	if err != nil {
		t.Fatalf("read back header %q: %v (wire %q)", name, err, b.Bytes())
	}
	if len(h) != 1 || len(h[name]) != 1 {
		return "", false
	}
	return h[name][0], true
}

// wantID is the contract written out again: printable ASCII, no space at either end, no
// leading '~' keeps its id; anything else is "~" + unpadded base64url.
func wantID(key string) string {
	plain := key == "" || key[0] != ' ' && key[0] != '~' && key[len(key)-1] != ' '
	for _, c := range []byte(key) {
		plain = plain && c >= 0x20 && c <= 0x7e
	}
	if plain {
		return key
	}
	return "~" + base64.RawURLEncoding.EncodeToString([]byte(key))
}

func TestMsgID(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ key, want string }{
		{"order_paid:1:42", "order_paid:1:42"},
		{"msg:17", "msg:17"},
		{"inv 7", "inv 7"},
		{"a~b", "a~b"},
		{"!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}", "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}"},
		{"inv\n7", "~aW52Cjc"},
		{"inv\r7", "~aW52DTc"},
		{"inv\t7", "~aW52CTc"},
		{"order-9 ", "~b3JkZXItOSA"},
		{" order-9", "~IG9yZGVyLTk"},
		{"~x", "~fng"},
		{"~", "~fg"},
		{"clé", "~Y2zDqQ"},
		{"a\x7fb", "~YX9i"},
		{"\xff", "~_w"},
	} {
		if got := MsgID(c.key); got != c.want {
			t.Errorf("MsgID(%q) = %q, want %q", c.key, got, c.want)
		}
		if got, err := Decode(c.want); err != nil || got != c.key {
			t.Errorf("Decode(%q) = %q, %v, want %q", c.want, got, err, c.key)
		}
	}
}

func TestDecodeRefuses(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"~x", "~fg==", "~f+", "~a/b", "~fh"} {
		if got, err := Decode(s); err == nil {
			t.Errorf("Decode(%q) = %q, want an error: not the unpadded base64url the Publisher writes", s, got)
		}
	}
}

func TestHeaderEncoding(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, name, value string }{
		{"traceparent", "traceparent", "traceparent"},
		{"Tenant.ID", "Tenant.ID", "Tenant.ID"},
		{"tenant:id", "~dGVuYW50Omlk", "tenant:id"},
		{"a b", "~YSBi", "a b"},
		{"", "~", ""},
		{"~x", "~fng", "~fng"},
		{"café", "~Y2Fmw6k", "café"},
		{" acme", "~IGFjbWU", "~IGFjbWU"},
		{"acme\t", "~YWNtZQk", "~YWNtZQk"},
		{"a\r\nX-Forged: 1", "~YQ0KWC1Gb3JnZWQ6IDE", "~YQ0KWC1Gb3JnZWQ6IDE"},
		{"\xff", "~_w", "~_w"},
	} {
		if got := headerName(c.in); got != c.name {
			t.Errorf("headerName(%q) = %q, want %q", c.in, got, c.name)
		}
		if got := headerValue(c.in); got != c.value {
			t.Errorf("headerValue(%q) = %q, want %q", c.in, got, c.value)
		}
	}
}

// keysThatCollapse are idempotency keys that nats.go's header rules make equal, and keys
// beside them: the seed corpus of the fuzz tests.
var keysThatCollapse = []string{
	"inv 7", "inv\n7", "inv\r7", "inv\r\n7", "inv\t7", "inv  7",
	"order-9", "order-9 ", " order-9", "order-9\t", "\torder-9", "order-9\n",
	"~x", "~fng", "fng", "~", "", " ", "msg:17", "welcome_email:2:42",
	"facture-n°7", "注文-9", "\xff\xfe", "a\x00b", "a\x7fb",
}

// Distinct keys give distinct ids, Decode gives each key back, the keys the contract calls
// safe keep their id, and every id arrives through nats.go's header write and read unchanged.
func FuzzMsgID(f *testing.F) {
	for i, a := range keysThatCollapse {
		f.Add(a, keysThatCollapse[(i+1)%len(keysThatCollapse)])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		ida, idb := MsgID(a), MsgID(b)
		if a != b && ida == idb {
			t.Fatalf("MsgID(%q) = MsgID(%q) = %q", a, b, ida)
		}
		if want := wantID(a); ida != want {
			t.Fatalf("MsgID(%q) = %q, want %q", a, ida, want)
		}
		if got, err := Decode(ida); err != nil || got != a {
			t.Fatalf("Decode(MsgID(%q)) = %q, %v", a, got, err)
		}
		if got, ok := throughNATS(t, "Nats-Msg-Id", ida); !ok || got != ida {
			t.Fatalf("Nats-Msg-Id %q arrives as %q (arrived: %v)", ida, got, ok)
		}
	})
}

// A header name and value of any bytes arrive through nats.go's header write and read as
// exactly one header whose name and value decode to the originals.
func FuzzHeader(f *testing.F) {
	for i, a := range keysThatCollapse {
		f.Add(a, keysThatCollapse[(i+1)%len(keysThatCollapse)])
	}
	f.Add("tenant:id", "acme")
	f.Add("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	f.Fuzz(func(t *testing.T, name, value string) {
		n, v := headerName(name), headerValue(value)
		gotV, ok := throughNATS(t, n, v)
		if !ok {
			t.Fatalf("header %q (from %q) did not arrive", n, name)
		}
		if gotV != v {
			t.Fatalf("value %q (from %q) arrives as %q", v, value, gotV)
		}
		if got, err := Decode(n); err != nil || got != name {
			t.Fatalf("Decode(headerName(%q)) = %q, %v", name, got, err)
		}
		if got, err := Decode(v); err != nil || got != value {
			t.Fatalf("Decode(headerValue(%q)) = %q, %v", value, got, err)
		}
	})
}
