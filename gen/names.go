package gen

import (
	"fmt"
	"sort"
	"strings"
	"unicode"
)

// initialisms are written in capitals in Go names (id -> ID, url -> URL), as golint and sqlc do.
var initialisms = map[string]bool{
	"acl": true, "api": true, "ascii": true, "cpu": true, "css": true, "db": true, "dns": true,
	"eof": true, "guid": true, "html": true, "http": true, "https": true, "id": true, "ip": true,
	"json": true, "lhs": true, "qps": true, "ram": true, "rhs": true, "rpc": true, "sla": true,
	"smtp": true, "sql": true, "ssh": true, "tcp": true, "tls": true, "ttl": true, "udp": true,
	"ui": true, "uid": true, "uuid": true, "uri": true, "url": true, "utf8": true, "vm": true,
	"xml": true, "xmpp": true, "xsrf": true, "xss": true,
}

// goName is the ONE naming function: a catalog name (snake_case, dotted, or a free enum
// value) becomes an exported Go name. Every character that is not an ASCII letter or digit
// separates words; each word is capitalised, initialisms are written in capitals. Exported
// names cannot be Go keywords, so keywords (type, func, range) need no escaping: type -> Type.
// The result may be empty (a value made of punctuation only) or start with a digit; callers
// that use it alone check both (validate), enum constants are prefixed with their type's name.
func goName(s string) string {
	var b strings.Builder
	words := strings.FieldsFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	})
	for _, w := range words {
		if initialisms[strings.ToLower(w)] {
			b.WriteString(strings.ToUpper(w))
			continue
		}
		b.WriteString(strings.ToUpper(w[:1]))
		b.WriteString(w[1:])
	}
	return b.String()
}

// fieldGoName is a field's Go name: its go_name when set, else the one derived from its name.
func fieldGoName(f *fieldDecl) string {
	if f.goName != nil {
		return f.goName.v
	}
	return goName(f.name.v)
}

// snakeName is the lower_snake_case a type name was probably meant to be: OrderItem,
// orderItem, order-item and "order item" become order_item, HTTPCode becomes http_code.
func snakeName(s string) string {
	var b strings.Builder
	rs := []rune(s)
	for i, r := range rs {
		switch {
		case r == '-' || r == ' ' || r == '.':
			b.WriteByte('_')
		case unicode.IsUpper(r):
			// A word starts at an upper-case letter after a lower-case one or a digit, or at
			// the last capital of a run that a lower-case letter follows (HTTPCode).
			if i > 0 && (unicode.IsLower(rs[i-1]) || unicode.IsDigit(rs[i-1]) ||
				unicode.IsUpper(rs[i-1]) && i+1 < len(rs) && unicode.IsLower(rs[i+1])) {
				b.WriteByte('_')
			}
			b.WriteRune(unicode.ToLower(r))
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// hint returns " (did you mean %q?)" for the candidate closest to s, when one is close enough
// to be a likely typo, else "".
func hint(s string, candidates []string, prefix string) string {
	best := Suggest(s, candidates)
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %s%q?)", prefix, best)
}

// Suggest returns the candidate closest to s when one is close enough to be a likely typo, or
// a truncated or extended word, else "": the rule behind the generator's "did you mean"
// hints, for the CLI's own. Case is ignored; ties go to the earlier candidate in sorted order.
func Suggest(s string, candidates []string) string {
	if len(s) > 64 {
		return "" // no name is that long; skip the quadratic distance on hostile input
	}
	best, bestD := "", -1
	sorted := append([]string(nil), candidates...)
	sort.Strings(sorted)
	for _, c := range sorted {
		d := editDistance(strings.ToLower(s), strings.ToLower(c))
		if bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	limit := 2
	if len(s) <= 3 {
		limit = 1
	}
	if bestD >= 0 && bestD <= limit && bestD < len(s) {
		return best
	}
	// A truncated or extended word ("idempotency", "maximum") is no typo but still a likely
	// mistake: suggest the one candidate it is a prefix of, or that is its prefix.
	match := ""
	for _, c := range sorted {
		ls, lc := strings.ToLower(s), strings.ToLower(c)
		if len(ls) >= 3 && len(lc) >= 3 && (strings.HasPrefix(lc, ls) || strings.HasPrefix(ls, lc)) {
			if match != "" {
				return ""
			}
			match = c
		}
	}
	return match
}

// editDistance is the Levenshtein distance counting an adjacent swap as one edit
// (optimal string alignment), so "strnig" is one edit from "string".
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}
