// Package outboxlabel makes label values out of text read from the outbox table, for a
// metrics or tracing adapter (runtime/outboxprom, runtime/outboxotel, or one of your own).
// Such a value must be UTF-8: a Prometheus label value, an OpenTelemetry attribute value, a log
// attribute. Text from the table may not be. An ordering key and an event type are VARBINARY,
// and a row written by other means than Enqueue may hold any bytes.
//
// It uses only the standard library, so a module that imports it gains no dependency.
package outboxlabel

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Escape returns s with each byte that is not part of valid UTF-8 written as \xNN. Valid UTF-8
// is returned as it is. Unlike strings.ToValidUTF8, Escape keeps apart two keys that differ
// only in their invalid bytes. Such a key collides only with a key that spells its escape out.
func Escape(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			fmt.Fprintf(&b, "\\x%02X", s[i])
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// Keys returns m keyed by Escape(key), for a map whose keys become label or attribute values,
// such as Snapshot.ByType. Two keys may escape alike: one that is not UTF-8 and one that spells
// its escape out. Keys combines their values with add, so that they give one series. Two series
// with the same labels would fail a scrape, and keeping one would hide the other.
func Keys[V any](m map[string]V, add func(a, b V) V) map[string]V {
	out := make(map[string]V, len(m))
	for k, v := range m {
		k = Escape(k)
		if prev, ok := out[k]; ok {
			v = add(prev, v)
		}
		out[k] = v
	}
	return out
}
