// outboxgen show: one message with every column (outbox.Inspect), the password masked in its
// payload's strings only.

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

	"github.com/outboxgen/outboxgen/runtime/outbox"
)

const showHelp = `usage: outboxgen show --id N [--json] [--dsn DSN]

Prints one message, whatever its state, with every column (outbox.Inspect): its whole
last_error (a panic's full stack; status and retry cut it at 160 characters) and its payload.
Read it before retrying or discarding a message. Exits 1 when no message has that id.
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
	r.EventType, r.IdempotencyKey, r.LastError = c.clean(r.EventType), c.clean(r.IdempotencyKey), c.clean(r.LastError)
	r.Payload = c.cleanJSON(r.Payload)
	if r.Headers != nil {
		clean := make(map[string]string, len(r.Headers))
		for k, v := range r.Headers {
			clean[c.clean(k)] = c.clean(v)
		}
		r.Headers = clean
	}
	if *asJSON {
		enc := json.NewEncoder(c.out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(r); err != nil {
			fmt.Fprintf(c.errw, "outboxgen show: writing JSON: %s\n", c.clean(err.Error()))
			return c.closeDB(db, opsExitDB)
		}
		return c.closeDB(db, opsExitOK)
	}
	var b bytes.Buffer
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "id\t%d\n", r.ID)
	fmt.Fprintf(w, "event type\t%s\n", r.EventType)
	fmt.Fprintf(w, "status\t%s\n", r.Status)
	fmt.Fprintf(w, "attempts\t%d of %d\n", r.Attempts, r.MaxAttempts)
	fmt.Fprintf(w, "idempotency key\t%s\n", r.IdempotencyKey)
	fmt.Fprintf(w, "created at\t%s\n", formatTime(r.CreatedAt))
	fmt.Fprintf(w, "next attempt at\t%s\n", formatTime(r.NextAttemptAt))
	fmt.Fprintf(w, "last claimed at\t%s\n", formatTime(r.ClaimedAt))
	fmt.Fprintf(w, "lease until\t%s\n", formatTime(r.ReclaimAfter))
	fmt.Fprintf(w, "claim token\t%s\n", r.ClaimToken)
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
			// Enqueue refused CR, LF and NUL in header values, so each is one line.
			fmt.Fprintf(hw, "  %s\t%s\n", k, r.Headers[k])
		}
		hw.Flush()
	}
	fmt.Fprintf(&b, "last error:\n%s\n", indent(r.LastError))
	payload := string(r.Payload)
	var pretty bytes.Buffer
	if json.Indent(&pretty, r.Payload, "", "  ") == nil {
		payload = pretty.String()
	}
	fmt.Fprintf(&b, "payload:\n%s\n", indent(payload))
	c.out.Write(b.Bytes())
	return c.closeDB(db, opsExitOK)
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

// indent prefixes every line of s with four spaces; "-" for an empty s.
func indent(s string) string {
	if s == "" {
		return "    -"
	}
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ")
}
