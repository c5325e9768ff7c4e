package outboxnats

import (
	"encoding/base64"
	"errors"
	"strings"
	"unicode/utf8"
)

// nats.go writes headers with net/http's rules: a CR or LF in a value becomes a space, spaces
// and tabs at either end of a value are trimmed, and a header whose name is not an HTTP token is
// left out without an error. Two keys that differ only there would reach JetStream as one
// Nats-Msg-Id, and the second message would be dropped as a duplicate of the first. So what the
// Publisher writes is encoded: a string those rules leave alone is written as it is, any other
// as "~" + its unpadded base64url. No string written as it is starts with '~', so distinct
// strings stay distinct, and Decode gives each back.

// encodedMark starts an encoded string.
const encodedMark = '~'

var b64 = base64.RawURLEncoding.Strict()

// MsgID returns the Nats-Msg-Id that the Publisher gives a message with idempotency key key
// (WithSource puts source + "/" in front). A key of printable ASCII (0x20 to 0x7e) that does not
// start or end with a space and does not start with '~' is its own id, so the ids of such keys
// do not change between versions of the relay and JetStream's duplicate window holds across a
// rolling deploy. Any other key becomes "~" + base64url(key) (RFC 4648 section 5, without
// padding). Distinct keys give distinct ids; Decode gives the key back.
func MsgID(key string) string {
	return encodeIf(key, plainID(key))
}

// Decode returns the string that the Publisher encoded as s: a Nats-Msg-Id (without
// WithSource's source + "/" in front), a header name or a header value. A string that starts
// with '~' is "~" + the unpadded base64url of the original; any other string is the original
// itself.
func Decode(s string) (string, error) {
	if s == "" || s[0] != encodedMark {
		return s, nil
	}
	b, err := b64.DecodeString(s[1:])
	if err != nil {
		return "", errors.New("outboxnats: Decode: '~' followed by something other than unpadded base64url")
	}
	return string(b), nil
}

// headerName encodes a header name: an HTTP token that does not start with '~' stays (net/http
// drops any other name); any other becomes "~" + base64url, which is a token.
func headerName(name string) string {
	plain := name != "" && name[0] != encodedMark
	for i := 0; plain && i < len(name); i++ {
		plain = isTokenByte(name[i])
	}
	return encodeIf(name, plain)
}

// headerValue encodes a header value: valid UTF-8 without control characters, without a space
// at either end and not starting with '~' stays, so text in any script travels as it is; any
// other value becomes "~" + base64url.
func headerValue(v string) string {
	plain := utf8.ValidString(v) && !strings.ContainsFunc(v, isControl) &&
		!strings.HasPrefix(v, " ") && !strings.HasSuffix(v, " ") && !strings.HasPrefix(v, string(encodedMark))
	return encodeIf(v, plain)
}

// plainID reports whether MsgID leaves key as it is.
func plainID(key string) bool {
	if key == "" {
		return true
	}
	if key[0] == ' ' || key[0] == encodedMark || key[len(key)-1] == ' ' {
		return false
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] > 0x7e {
			return false
		}
	}
	return true
}

func encodeIf(s string, plain bool) string {
	if plain {
		return s
	}
	return string(encodedMark) + b64.EncodeToString([]byte(s))
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// isTokenByte reports whether c may appear in an HTTP token (RFC 9110 section 5.6.2), the
// only header names net/http writes.
func isTokenByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}
