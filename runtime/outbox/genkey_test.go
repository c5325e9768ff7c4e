package outbox_test

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"testing"

	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// legacyIdempotencyKey and legacyOrderingKey are, verbatim, the helpers every generated file
// carried before generated code called the runtime's: keys already stored were computed by
// them, so the runtime's must agree byte for byte.
func legacyIdempotencyKey(eventType string, values ...string) string {
	var b strings.Builder
	b.WriteString(eventType)
	for _, v := range values {
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(len(v)))
		b.WriteByte(':')
		b.WriteString(v)
	}
	key := b.String()
	if len(key) <= 191 {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return "sha256:" + hex.EncodeToString(sum[:])
}

func legacyOrderingKey(group string, values ...string) string {
	var b strings.Builder
	b.WriteString(group)
	for _, v := range values {
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(len(v)))
		b.WriteByte(':')
		b.WriteString(v)
	}
	key := b.String()
	if len(key) <= 191 {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return group + ":sha256:" + hex.EncodeToString(sum[:])
}

// keyInputs covers separators inside values, empty values, multi-byte text, invalid UTF-8,
// and lengths on both sides of 191 bytes (the prefix "welcome_email:173:" is 18 bytes, so 173
// bytes of value make a key of exactly 191).
var keyInputs = []struct {
	prefix string
	values []string
}{
	{"welcome_email", nil},
	{"welcome_email", []string{""}},
	{"welcome_email", []string{"42"}},
	{"quota_reset", []string{"acme", "eu:1", "-1", "32", "1099511627776", "true", "2026-03-01T00:30:00.123456789Z"}},
	{"e", []string{"a:b", "c"}},
	{"e", []string{"a", "b:c"}},
	{"e", []string{":1:", "\\", "|", "é", "\xff\x00"}},
	{"welcome_email", []string{strings.Repeat("x", 172)}},
	{"welcome_email", []string{strings.Repeat("x", 173)}},
	{"welcome_email", []string{strings.Repeat("x", 174)}},
	{"welcome_email", []string{strings.Repeat("x", 300)}},
	{"orders", []string{strings.Repeat("é", 100)}},
	{"orders", []string{strings.Repeat("é", 90), strings.Repeat("é", 90)}},
	{strings.Repeat("g", 191), nil},
	{strings.Repeat("g", 192), nil},
}

// TestKeysMatchGeneratedCode: the runtime's key helpers give exactly what the copies in
// generated files gave, for every input, hashed or not.
func TestKeysMatchGeneratedCode(t *testing.T) {
	for _, in := range keyInputs {
		if got, want := outbox.IdempotencyKeyOf(in.prefix, in.values...), legacyIdempotencyKey(in.prefix, in.values...); got != want {
			t.Errorf("IdempotencyKeyOf(%q, %q) = %q, want %q (what generated code stored)", in.prefix, in.values, got, want)
		}
		if got, want := outbox.OrderingKeyOf(in.prefix, in.values...), legacyOrderingKey(in.prefix, in.values...); got != want {
			t.Errorf("OrderingKeyOf(%q, %q) = %q, want %q (what generated code stored)", in.prefix, in.values, got, want)
		}
	}
}

// TestKeysPinned pins keys as literals, so a change to the helpers and the copies above
// together still fails.
func TestKeysPinned(t *testing.T) {
	at191 := "welcome_email:173:" + strings.Repeat("x", 173)
	cases := []struct{ name, got, want string }{
		{"no values", outbox.IdempotencyKeyOf("welcome_email"), "welcome_email"},
		{"one value", outbox.IdempotencyKeyOf("welcome_email", "42"), "welcome_email:2:42"},
		{"empty value", outbox.IdempotencyKeyOf("e", ""), "e:0:"},
		{"separators", outbox.IdempotencyKeyOf("e", "a:b", "c"), "e:3:a:b:1:c"},
		{"byte lengths", outbox.IdempotencyKeyOf("e", "é"), "e:2:é"},
		{"191 bytes kept", outbox.IdempotencyKeyOf("welcome_email", strings.Repeat("x", 173)), at191},
		{"over 191 hashed", outbox.IdempotencyKeyOf("welcome_email", strings.Repeat("x", 300)), "sha256:37f5a4ad4e36f2810e88d95d1e0b6bb7a937a5c7c05f4594b1eb7e4da3f51079"},
		{"ordering", outbox.OrderingKeyOf("orders", "o-42"), "orders:4:o-42"},
		{"ordering 191 bytes kept", outbox.OrderingKeyOf("welcome_email", strings.Repeat("x", 173)), at191},
		{"ordering over 191 hashed, group kept", outbox.OrderingKeyOf("orders", strings.Repeat("é", 100)), "orders:sha256:9fb392d8d7c93621693b53616254b95935c0e1b66f7259e12addb13d1fe443d0"},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, c.got, c.want)
		}
	}
	long := outbox.IdempotencyKeyOf("welcome_email", strings.Repeat("x", 174))
	sum := sha256.Sum256([]byte("welcome_email:174:" + strings.Repeat("x", 174)))
	if want := "sha256:" + hex.EncodeToString(sum[:]); long != want {
		t.Errorf("a 192-byte key: got %q, want %q, the SHA-256 of the whole text", long, want)
	}
}

type accountID string

func TestKeyText(t *testing.T) {
	if got := outbox.KeyText(accountID("acme:1")); got != "acme:1" {
		t.Errorf("KeyText(accountID(%q)) = %q, want the string unchanged", "acme:1", got)
	}
}
