package outboxconsole

import (
	"fmt"
	"math"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Token rules: the token is all that guards a console reached over a network, so it must be
// hard to guess, not merely long. Length is counted in characters (a 16-byte token of 4-byte
// characters is 4 characters), and guessing is estimated by a simple rule, the length times
// log2 of the number of distinct characters: a token that repeats one character, or alternates
// two, is refused whatever its length. A random 32-character hex token scores about 125 bits.
const (
	minTokenChars    = 16
	minTokenDistinct = 8
	minTokenBits     = 64
)

// TokenHint says how to make a token that CheckToken accepts.
const TokenHint = "generate one, e.g. with `openssl rand -hex 32`"

// CheckToken says why token is too weak to guard a console, or nil: it must have at least 16
// characters, at least 8 distinct ones, an estimated 64 bits or more (length × log2 of the
// distinct characters), no control character, and no space at either end (a bearer header is
// read without them).
func CheckToken(token string) error {
	if !utf8.ValidString(token) {
		return fmt.Errorf("the token is not UTF-8; %s", TokenHint)
	}
	if strings.IndexFunc(token, unicode.IsControl) >= 0 {
		return fmt.Errorf("the token has a control character; %s", TokenHint)
	}
	switch trimmed := strings.TrimSpace(token); {
	case token != "" && trimmed == "":
		return fmt.Errorf("the token is only spaces; %s", TokenHint)
	case trimmed != token:
		return fmt.Errorf("the token starts or ends with a space (a bearer header is read without them); %s", TokenHint)
	}
	n := utf8.RuneCountInString(token)
	if n < minTokenChars {
		return fmt.Errorf("the token must be at least %d characters (got %d); %s", minTokenChars, n, TokenHint)
	}
	distinct := map[rune]bool{}
	for _, r := range token {
		distinct[r] = true
	}
	if len(distinct) < minTokenDistinct {
		return fmt.Errorf("the token has only %d distinct characters, at least %d are needed: it is too easy to guess; %s",
			len(distinct), minTokenDistinct, TokenHint)
	}
	if bits := float64(n) * math.Log2(float64(len(distinct))); bits < minTokenBits {
		return fmt.Errorf("the token is too easy to guess (about %.0f bits by its length and distinct characters, at least %d are needed); %s",
			bits, minTokenBits, TokenHint)
	}
	return nil
}
