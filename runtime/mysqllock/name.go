package mysqllock

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
)

// plainName is the portable subset: MariaDB allows 192 bytes and is case-sensitive, MySQL allows
// 64 characters (error 3057 above that) and its case rules are documented differently, so only
// lowercase ASCII names of at most 64 characters are passed through unchanged.
var plainName = regexp.MustCompile(`^[a-z0-9_.:-]{1,64}$`)

// ServerName returns the name the server sees for the lock name: the name unchanged when it
// matches ^[a-z0-9_.:-]{1,64}$, otherwise "h:" followed by the first 62 hex characters of its
// SHA-256 (64 characters in all). The mapping is a contract across versions: two versions of a
// service must take the SAME server lock for the same name, so it never changes. The empty name
// maps to ""; TryDo and Do refuse it.
func ServerName(name string) string {
	if name == "" || plainName.MatchString(name) {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return "h:" + hex.EncodeToString(sum[:])[:62]
}
