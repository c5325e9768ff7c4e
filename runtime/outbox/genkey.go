package outbox

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
)

// maxGeneratedKeyLen is the width of the indexed key columns (VARCHAR(191)): a longer key is
// hashed.
const maxGeneratedKeyLen = 191

// IdempotencyKeyOf is the idempotency key of a generated payload type (generated code support:
// see the package documentation): eventType, then ":<byte length>:<value>" for each value. The
// length prefix makes the text decodable, so different value lists never share it ("a:b","c"
// and "a","b:c" differ). A key longer than 191 bytes (the indexed column) becomes "sha256:"
// and the hex SHA-256 of that text. Its output never changes between releases: stored rows are
// matched by it.
func IdempotencyKeyOf(eventType string, values ...string) string {
	key := joinKey(eventType, values)
	if len(key) <= maxGeneratedKeyLen {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// OrderingKeyOf is the ordering key of a generated payload type (generated code support: see
// the package documentation): group, then ":<byte length>:<value>" for each value, as
// IdempotencyKeyOf writes them. A key longer than 191 bytes becomes "<group>:sha256:" and the
// hex SHA-256 of that text: the group stays readable, and keys of different groups still
// differ. Its output never changes between releases: stored rows are matched by it.
func OrderingKeyOf(group string, values ...string) string {
	key := joinKey(group, values)
	if len(key) <= maxGeneratedKeyLen {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return group + ":sha256:" + hex.EncodeToString(sum[:])
}

// joinKey writes prefix, then ":<byte length>:<value>" per value.
func joinKey(prefix string, values []string) string {
	var b strings.Builder
	b.WriteString(prefix)
	for _, v := range values {
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(len(v)))
		b.WriteByte(':')
		b.WriteString(v)
	}
	return b.String()
}

// KeyText is the text of a key field whose type is a Go type of the application's (a {go:}
// type of the catalog), which the generator proved a string kind (generated code support: see
// the package documentation). Should the type change after generation, the ~string constraint
// makes that a compile error: string(x) of an integer would compile and yield one rune.
func KeyText[T ~string](v T) string {
	return string(v)
}
