// Package utf8esc writes text that may not be UTF-8 (an ordering key is VARBINARY, and a row
// written by other means than Enqueue may hold any bytes) where only UTF-8 is allowed: a
// Prometheus label value, an OpenTelemetry attribute value.
//
// This module holds its own copy of the root module's internal/utf8esc: a module imports no
// internal package of another, whose API may change in any release.
package utf8esc

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Escape returns s with each byte that is not part of valid UTF-8 written as \xNN; valid UTF-8
// is returned as it is. Unlike strings.ToValidUTF8, two keys that differ only in their invalid
// bytes stay apart (they collide only with a key that spells the escape out).
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

// Keys returns m keyed by Escape(key), for a map whose keys become label or attribute values
// (event types are VARBINARY too). Keys that escape alike (one that is not UTF-8 and one that
// spells its escape out) are combined with add, so that they give one series, not two with the
// same labels (a failed scrape) or one that hides the other.
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
