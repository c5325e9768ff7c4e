// outboxgen show: one message with every column (outbox.Inspect), its text masked and made
// inert for a terminal, the payload as stored.

package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/outboxgen/outboxgen/internal/termesc"
	"github.com/outboxgen/outboxgen/runtime/outbox"
)

const showHelp = `usage: outboxgen show --id N [--json] [--dsn DSN]

Prints one message, whatever its state, with every column (outbox.Inspect): its whole
last_error (a panic's full stack; status and retry cut it at 160 characters) and its payload
as stored (the first 64 KiB; --json prints it whole). Control characters in them are shown
escaped (\x1b). Read it before retrying or discarding a message. Exits 1 when no message has
that id.
`

func runShow(args []string, stdout, stderr io.Writer) int {
	c := newOpsCmd("show", showHelp, stdout, stderr)
	var ids idsFlag
	c.fs.Var(&ids, "id", "the message's id")
	asJSON := c.fs.Bool("json", false, "print JSON (outbox.Record's fields)")
	args, bare := bareID(args)
	if code, ok := c.parse(args); !ok {
		return code
	}
	if bare != "" {
		// "outboxgen show 6" is the natural thing to type; say how, rather than "takes no
		// arguments". Only digits are echoed: an argument could be a pasted DSN.
		return c.usageErr("give the id with --id: outboxgen show --id %s", bare)
	}
	if len(ids) != 1 {
		return c.usageErr("give one message: --id N")
	}
	ctx, stop := opsContext()
	defer stop()
	db, code, ok := c.open(ctx)
	if !ok {
		return code
	}
	r, err := outbox.Inspect(ctx, db, ids[0])
	if errors.Is(err, outbox.ErrNotFound) {
		fmt.Fprintf(c.errw, "outboxgen show: no message %d (purged, or never existed)\n", ids[0])
		return c.closeDB(db, opsExitCheck)
	}
	if err != nil {
		return c.closeDB(db, c.dbErr("inspect", err))
	}
	if *asJSON {
		doc, err := c.showJSON(r)
		if err != nil {
			fmt.Fprintf(c.errw, "outboxgen show: writing JSON: %s\n", c.line(err.Error()))
			return c.closeDB(db, opsExitDB)
		}
		c.out.Write(doc)
		return c.closeDB(db, opsExitOK)
	}
	c.out.Write(c.showText(r))
	return c.closeDB(db, opsExitOK)
}

// showPayloadMax is how much of a payload show prints: a payload can be 4 MiB, a screenful is
// a few KiB, and the whole one is in --json.
const showPayloadMax = 64 << 10

// showText is show's output for people: every column, each value from the database masked and
// escaped (the payload as stored, not re-indented: indenting a deeply nested document costs its
// depth times its length).
func (c *opsCmd) showText(r outbox.Record) []byte {
	var b bytes.Buffer
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "id\t%d\n", r.ID)
	fmt.Fprintf(w, "event type\t%s\n", c.line(r.EventType))
	fmt.Fprintf(w, "status\t%s\n", c.line(string(r.Status)))
	fmt.Fprintf(w, "attempts\t%d of %d\n", r.Attempts, r.MaxAttempts)
	fmt.Fprintf(w, "idempotency key\t%s\n", c.line(r.IdempotencyKey))
	fmt.Fprintf(w, "created at\t%s\n", formatTime(r.CreatedAt))
	fmt.Fprintf(w, "next attempt at\t%s\n", formatTime(r.NextAttemptAt))
	fmt.Fprintf(w, "last claimed at\t%s\n", formatTime(r.ClaimedAt))
	fmt.Fprintf(w, "lease until\t%s\n", formatTime(r.ReclaimAfter))
	fmt.Fprintf(w, "claim token\t%s\n", c.line(r.ClaimToken))
	fmt.Fprintf(w, "sent at\t%s\n", formatTime(r.SentAt))
	fmt.Fprintf(w, "failed at\t%s\n", formatTime(r.FailedAt))
	w.Flush()
	if len(r.Headers) > 0 {
		keys := make([]string, 0, len(r.Headers))
		for k := range r.Headers {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteString("headers:\n")
		hw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		for _, k := range keys {
			fmt.Fprintf(hw, "  %s\t%s\n", c.line(k), c.line(r.Headers[k]))
		}
		hw.Flush()
	}
	fmt.Fprintf(&b, "last error:\n%s\n", indent(c.text(r.LastError)))
	payload := c.clean(string(r.Payload))
	shown := payload
	if len(shown) > showPayloadMax {
		cut := showPayloadMax
		for cut > 0 && !utf8.RuneStart(shown[cut]) {
			cut-- // not inside a character, whose tail would print as \xNN
		}
		shown = shown[:cut]
	}
	fmt.Fprintf(&b, "payload:\n%s\n", indent(c.text(shown)))
	if len(shown) < len(payload) {
		fmt.Fprintf(&b, "    ... (payload truncated: the first %d of %d bytes; outboxgen show --id %d --json prints it whole)\n",
			len(shown), len(payload), r.ID)
	}
	return b.Bytes()
}

// showJSON is show --json: outbox.Record's fields, indented, with the payload compact inside
// it. Indenting the payload as well (what json.Encoder's SetIndent does to a RawMessage) costs
// its depth times its length: a 20 KB document nested ten thousand deep became 200 MB. Strings
// from the database are masked and written with outboxlabel.Escape, and the document with termesc.JSON.
func (c *opsCmd) showJSON(r outbox.Record) ([]byte, error) {
	r.EventType, r.IdempotencyKey, r.LastError = c.jsonString(r.EventType), c.jsonString(r.IdempotencyKey), c.jsonString(r.LastError)
	r.ClaimToken, r.OrderingKey = c.jsonString(r.ClaimToken), c.jsonString(r.OrderingKey)
	if r.Headers != nil {
		clean := make(map[string]string, len(r.Headers))
		for k, v := range r.Headers {
			clean[c.jsonString(k)] = c.jsonString(v)
		}
		r.Headers = clean
	}
	var payload bytes.Buffer
	if err := json.Compact(&payload, c.cleanJSON(r.Payload)); err != nil {
		payload.Reset()
		payload.WriteString("null")
	}
	r.Payload = nil
	doc, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, err
	}
	// Payload is a top-level field, the only one at this indent with that name, and a string
	// in the document cannot hold a raw newline: this is its line.
	const placeholder = "\n  \"Payload\": null"
	at := bytes.Index(doc, []byte(placeholder))
	if at < 0 {
		return nil, errors.New("outbox.Record has no Payload field")
	}
	at += len(placeholder) - len("null")
	out := make([]byte, 0, len(doc)+payload.Len()+1)
	out = append(append(append(out, doc[:at]...), payload.Bytes()...), doc[at+len("null"):]...)
	return append(termesc.JSON(out), '\n'), nil
}

// bareID finds a message id given without --id (show 6, show --dsn X 6, show 6 --json): the
// only argument that is neither a flag nor a flag's value, when it is a number. It returns
// args without it, so the flags around it are still parsed and checked, and the id; or args
// unchanged and "".
func bareID(args []string) ([]string, string) {
	at := -1
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return args, ""
		case len(a) > 1 && a[0] == '-':
			name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
			if (name == "dsn" || name == "id") && !hasValue {
				i++ // the next argument is its value
			}
		case at >= 0:
			return args, "" // two arguments: not a bare id
		default:
			at = i
		}
	}
	if at < 0 {
		return args, ""
	}
	if !isID(args[at]) {
		return args, ""
	}
	return append(append([]string(nil), args[:at]...), args[at+1:]...), args[at]
}

// cleanJSON masks the password in the strings (values and keys) of a JSON document, and only
// there: masking the raw text could turn a number or true into "*****" and the document into
// something that is not JSON.
func (c *opsCmd) cleanJSON(raw json.RawMessage) json.RawMessage {
	if !c.mayHoldSecret(string(raw)) {
		return raw // as stored: nothing to mask, and no decoding of a document at any depth
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // numbers come back exactly as written
	var v any
	if err := dec.Decode(&v); err != nil {
		return json.RawMessage(strconv.Quote(c.clean(string(raw)))) // not JSON: shown as a string
	}
	var walk func(any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case string:
			return c.clean(x)
		case []any:
			for i := range x {
				x[i] = walk(x[i])
			}
		case map[string]any:
			m := make(map[string]any, len(x))
			for k, e := range x {
				m[c.clean(k)] = walk(e)
			}
			return m
		}
		return v
	}
	out, err := json.Marshal(walk(v))
	if err != nil {
		return json.RawMessage(strconv.Quote(c.clean(string(raw))))
	}
	return out
}

// mayHoldSecret says some form of the password occurs in s.
func (c *opsCmd) mayHoldSecret(s string) bool {
	for _, sec := range c.secrets {
		if sec != "" && strings.Contains(s, sec) {
			return true
		}
	}
	return false
}

// indent prefixes every line of s with four spaces; "-" for an empty s.
func indent(s string) string {
	if s == "" {
		return "    -"
	}
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ")
}
