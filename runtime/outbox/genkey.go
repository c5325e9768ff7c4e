package outbox

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
)

// maxGeneratedKeyLen is the width of the indexed key columns. A longer key is hashed.
const maxGeneratedKeyLen = 191

// IdempotencyKeyOf is the idempotency key of a generated payload type, for generated code. It
// is eventType, followed by a colon, the value's byte length, a colon and the value for each
// value. The length prefix makes the text decodable, so different value lists never share it.
// A key longer than 191 bytes, the indexed column's width, becomes "sha256:" and the hex
// SHA-256 of that text. Its output never changes between releases, since stored rows are
// matched by it.
func IdempotencyKeyOf(eventType string, values ...string) string {
	key := joinKey(eventType, values)
	if len(key) <= maxGeneratedKeyLen {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// OrderingKeyOf is the ordering key of a generated payload type, for generated code. It is
// group, followed by each value as IdempotencyKeyOf writes them. A key longer than 191 bytes
// becomes the group, then ":sha256:" and the hex SHA-256 of that text. The group thus stays
// readable, and keys of different groups still differ. Its output never changes between
// releases, since stored rows are matched by it.
func OrderingKeyOf(group string, values ...string) string {
	key := joinKey(group, values)
	if len(key) <= maxGeneratedKeyLen {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return group + ":sha256:" + hex.EncodeToString(sum[:])
}

// joinKey writes prefix, then a colon, the byte length, a colon and the value per value.
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

// KeyText is the text of a key field, for generated code. The field's type is a Go type of the
// application's, named by a {go:} type of the catalog, which the generator proved a string
// kind. Should the type change after generation, the ~string constraint makes that a compile
// error. string(x) of an integer would compile and yield one rune.
func KeyText[T ~string](v T) string {
	return string(v)
}
