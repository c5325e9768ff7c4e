package outboxconsole

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"
)

// TestCheckToken: tokens that are long but easy to guess are refused with a reason; random
// ones (hex and base64 of 16 random bytes or more, as `openssl rand` makes) are accepted.
func TestCheckToken(t *testing.T) {
	for token, want := range map[string]string{
		"":                               "at least 16 characters",
		"short":                          "at least 16 characters",
		strings.Repeat(" ", 16):          "only spaces",
		strings.Repeat(" ", 40):          "only spaces",
		strings.Repeat("a", 16):          "only 1 distinct",
		strings.Repeat("a", 200):         "only 1 distinct",
		strings.Repeat("ab", 64):         "only 2 distinct",
		"abcdefgh" + "abcdefgh":          "too easy to guess",
		strings.Repeat("\U0001F600", 16): "only 1 distinct",
		"\U0001F600\U0001F601\U0001F602\U0001F603": "at least 16 characters", // 16 bytes, 4 characters
		"tab\tinside-a-token-0123456789":           "control character",
		" leading-space-token-0123456789":          "starts or ends with a space",
		"not-utf8-\xff-token-0123456789":           "not UTF-8",
		testToken:                                  "",
		"correct horse battery staple":             "",
		"0123456789abcdef":                         "",
	} {
		err := CheckToken(token)
		switch {
		case want == "" && err != nil:
			t.Errorf("CheckToken(%q) = %v, want nil", token, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("CheckToken(%q) = %v, want an error saying %q", token, err, want)
		case err != nil && !strings.Contains(err.Error(), "openssl rand -hex 32"):
			t.Errorf("CheckToken(%q) = %v, want the hint to generate one", token, err)
		}
	}
	for i := 0; i < 200; i++ {
		b := make([]byte, 16+i%17)
		_, _ = rand.Read(b)
		for _, token := range []string{hex.EncodeToString(b), base64.RawURLEncoding.EncodeToString(b)} {
			if err := CheckToken(token); err != nil {
				t.Errorf("CheckToken(%q), a random token = %v, want nil", token, err)
			}
		}
	}
}

// TestWeakTokenRefusesEveryRequest: a console given a weak token logs why and serves nothing,
// not even to a client that sends that token.
func TestWeakTokenRefusesEveryRequest(t *testing.T) {
	t.Parallel()
	weak := strings.Repeat("a", 32)
	b := setup(t, WithToken(weak))
	for _, path := range []string{"/", "/login", "/failed"} {
		r := b.get(path, "Authorization", "Bearer "+weak)
		if r.status != http.StatusInternalServerError || !strings.Contains(r.body, "token is refused") {
			t.Errorf("GET %s with a weak token = %d %q, want 500 saying the token is refused", path, r.status, r.body)
		}
	}
	if !strings.Contains(b.logs.String(), `msg="console token refused`) {
		t.Errorf("the weak token was not logged:\n%s", b.logs)
	}
}
