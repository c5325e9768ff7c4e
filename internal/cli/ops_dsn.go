package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// envDSN is read when --dsn is not given, so the password need not appear in a process listing.
const envDSN = "OUTBOX_DSN"

// defaultDialTimeout bounds the connect attempt when the DSN sets none, so an unreachable host
// fails with exit 3 in seconds instead of hanging on the OS's TCP timeout.
const defaultDialTimeout = 10 * time.Second

// opsDSN is a parsed operator DSN: what to connect with, what may be printed, and what must
// be scrubbed from any text printed.
type opsDSN struct {
	// cfg is what the driver connects with: parseTime=true and loc=UTC are always set,
	// because the runtime reads DATETIME columns as UTC time.Time.
	cfg *mysql.Config
	// connect is cfg as a DSN string.
	connect string
	// shown is the DSN with the password removed; the only form ever printed.
	shown string
	// secrets are the forms the password may take in driver or parser error text.
	secrets []string
}

// resolveDSN picks --dsn, else $OUTBOX_DSN, and parses it. Its errors never contain the password.
func resolveDSN(flagValue string, getenv func(string) string) (opsDSN, error) {
	raw := flagValue
	if raw == "" {
		raw = getenv(envDSN)
	}
	if raw == "" {
		return opsDSN{}, fmt.Errorf("no database: pass --dsn or set %s", envDSN)
	}
	secrets := passwordForms(rawPassword(raw))
	cfg, err := mysql.ParseDSN(raw)
	if err != nil {
		// Parser errors may quote parts of the DSN; scrub what looks like its password.
		return opsDSN{}, errors.New("invalid DSN: " + scrubAll(strings.TrimPrefix(err.Error(), "invalid DSN: "), secrets))
	}
	secrets = append(secrets, passwordForms(cfg.Passwd)...)
	if cfg.DBName == "" {
		// Else every query fails later with "No database selected", exit 3.
		return opsDSN{}, errors.New("the DSN names no database: user:password@tcp(host:3306)/DBNAME")
	}
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	if cfg.Timeout == 0 {
		cfg.Timeout = defaultDialTimeout
	}
	// Shown as user@net(addr)/db: enough to tell which database, none of the parameters.
	shown := fmt.Sprintf("%s@%s(%s)/%s", cfg.User, cfg.Net, cfg.Addr, cfg.DBName)
	return opsDSN{cfg: cfg, connect: cfg.FormatDSN(), shown: shown, secrets: secrets}, nil
}

// rawPassword extracts the password the way the driver's parser does (the last '/' ends the
// address part, the last '@' before it ends the user info, the first ':' in that starts the
// password), so even a DSN the parser rejects is scrubbed from its error.
func rawPassword(dsn string) string {
	if slash := strings.LastIndex(dsn, "/"); slash >= 0 {
		dsn = dsn[:slash]
	}
	at := strings.LastIndex(dsn, "@")
	if at < 0 {
		return ""
	}
	userinfo := dsn[:at]
	colon := strings.Index(userinfo, ":")
	if colon < 0 {
		return ""
	}
	return userinfo[colon+1:]
}

// passwordForms are the ways text may spell the password p: as is, URL-escaped (a DSN), and
// escaped inside a quoted Go or JSON string (a %q flag echo, a payload, a JSON error).
func passwordForms(p string) []string {
	if p == "" {
		return nil
	}
	forms := []string{p, url.QueryEscape(p), url.PathEscape(p), strings.Trim(strconv.Quote(p), `"`)}
	if j, err := json.Marshal(p); err == nil {
		forms = append(forms, strings.Trim(string(j), `"`))
	}
	return forms
}

// scrub masks every form of the password in s.
//
// A form shorter than wordSafeLen is left alone where it is part of a longer word: a letter,
// digit or '_' at its edge, continued by another on that side. A short password is often an
// ordinary word ("outbox", "email"). Masked everywhere, it would mangle table names and event
// types in server errors and in status --json ("welcome_*****"). Where a password leaks (a DSN's
// user:password@, a quoted flag value), something delimits it.
//
// Longer forms are masked everywhere: they do not collide with names. They go first, so a
// short form that is a substring of an escaped one cannot leave the rest behind.
func scrub(s string, secrets []string) string { return scrubWith(s, secrets, true) }

// scrubAll masks every form of the password wherever it stands: for text that names no
// identifiers of ours (flag echoes, DSN parse errors), where a masked word costs nothing.
func scrubAll(s string, secrets []string) string { return scrubWith(s, secrets, false) }

func scrubWith(s string, secrets []string, wordRule bool) string {
	sorted := append([]string(nil), secrets...)
	for i := 1; i < len(sorted); i++ {
		for j := i; j > 0 && len(sorted[j]) > len(sorted[j-1]); j-- {
			sorted[j], sorted[j-1] = sorted[j-1], sorted[j]
		}
	}
	for _, sec := range sorted {
		if sec == "" {
			continue
		}
		var b strings.Builder
		done := 0 // s[:done] is in b
		for from := 0; ; {
			i := strings.Index(s[from:], sec)
			if i < 0 {
				break
			}
			i += from
			end := i + len(sec)
			short := wordRule && len(sec) < wordSafeLen
			continuedBefore := short && i > 0 && wordByte(sec[0]) && wordByte(s[i-1]) && !escapeBefore(s, i)
			continuedAfter := short && end < len(s) && wordByte(sec[len(sec)-1]) && wordByte(s[end])
			if !continuedBefore && !continuedAfter {
				b.WriteString(s[done:i])
				b.WriteString("*****")
				done = end
				from = end
			} else {
				from = i + 1
			}
		}
		b.WriteString(s[done:])
		s = b.String()
	}
	return s
}

// wordSafeLen is the length from which a password is masked even inside a longer word.
const wordSafeLen = 12

// wordByte says whether c continues a word: ASCII letters, digits, '_', '.' (event types are
// dotted: email.bounced), and every byte of a multi-byte UTF-8 character.
func wordByte(c byte) bool {
	return c == '_' || c == '.' || c >= 0x80 || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// escapeBefore says whether s[:i] ends with an escape sequence (\n, %3A, \u0022): its last
// letter or digit delimits what follows rather than continuing a word with it.
func escapeBefore(s string, i int) bool {
	hex := func(from, n int) bool {
		for k := from; k < from+n; k++ {
			if !strings.ContainsRune("0123456789abcdefABCDEF", rune(s[k])) {
				return false
			}
		}
		return true
	}
	return i >= 2 && s[i-2] == '\\' ||
		i >= 3 && s[i-3] == '%' && hex(i-2, 2) ||
		i >= 6 && s[i-6] == '\\' && s[i-5] == 'u' && hex(i-4, 4)
}
