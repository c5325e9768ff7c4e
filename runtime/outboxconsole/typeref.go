package outboxconsole

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/url"
)

// An event type is VARBINARY: any bytes, matched exactly. A page cannot send one back as shown:
// the browser turns a byte that is not UTF-8 into U+FFFD and a CR into CRLF, a masked type
// shows the mask, and an escaped one shows the escape. So every form and link that names a
// type carries a reference to its exact bytes instead (the field "typeref"), and the console
// resolves it back. A reference is the type sealed with AES-GCM under a key derived from the
// per-process secret: the page never shows the bytes that WithRedact masked, nobody can forge
// one, and a restart makes the old ones invalid as it makes the CSRF token invalid. The nonce
// is derived from the type (as in SIV), so a type has one reference for the life of the
// process and pages that refresh do not change.
//
// The field "type" still takes a type as plain text, for scripts and hand-written URLs.

const typeRefField = "typeref"

type typeSealer struct {
	aead  cipher.AEAD
	nonce []byte // the HMAC key that derives a type's nonce
}

func newTypeSealer(secret string) typeSealer {
	derive := func(label string) []byte {
		m := hmac.New(sha256.New, []byte(secret))
		m.Write([]byte("outboxconsole " + label))
		return m.Sum(nil)
	}
	block, err := aes.NewCipher(derive("type reference key"))
	if err != nil {
		panic(err) // a 32-byte key is always a valid AES-256 key
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		panic(err) // AES has the 16-byte block GCM needs
	}
	return typeSealer{aead: aead, nonce: derive("type reference nonce")}
}

// seal is the reference to the event type t.
func (s typeSealer) seal(t string) string {
	m := hmac.New(sha256.New, s.nonce)
	m.Write([]byte(t))
	nonce := m.Sum(nil)[:s.aead.NonceSize()]
	return base64.RawURLEncoding.EncodeToString(s.aead.Seal(nonce, nonce, []byte(t), nil))
}

var errBadTypeRef = errors.New("the event type reference is not one this console made (reload the page: a restarted console makes new ones)")

// open is the event type a reference names.
func (s typeSealer) open(ref string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(ref)
	n := s.aead.NonceSize()
	if err != nil || len(b) < n {
		return "", errBadTypeRef
	}
	t, err := s.aead.Open(nil, b[:n], b[n:], nil)
	if err != nil {
		return "", errBadTypeRef
	}
	return string(t), nil
}

// eventType reads the event type a request names: the reference in "typeref", else the plain
// text in "type"; "" when it names none.
func (s typeSealer) eventType(v url.Values) (string, error) {
	if ref := v.Get(typeRefField); ref != "" {
		return s.open(ref)
	}
	return v.Get("type"), nil
}

// plain says whether a link may name t as plain text: it reads as it is (nothing escaped or
// masked) and survives a browser's form encoding. Other types go by reference.
func (c *Console) plain(t string) bool { return c.clean(t) == t }

// typeQuery sets the query parameter that names t in a link: "type" for a plain type, so
// links stay readable and outlive a restart, else its reference.
func (c *Console) typeQuery(v url.Values, t string) {
	if c.plain(t) {
		v.Set("type", t)
	} else {
		v.Set(typeRefField, c.types.seal(t))
	}
}
