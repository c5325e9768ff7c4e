package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/outboxgen/outboxgen/internal/testdb"
	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// show masks the password in the payload's strings only: a password that is also a number in
// the payload must not turn the document into invalid JSON (show --json exited 3).
func TestShowMasksPayloadStringsOnly(t *testing.T) {
	t.Parallel()
	var out, errb bytes.Buffer
	c := newOpsCmd("show", showHelp, &out, &errb)
	c.secrets = passwordForms("42")
	got := c.cleanJSON(json.RawMessage(`{"company_id":42,"note":"code 42","ok":true,"42":[42,"42"]}`))
	if !json.Valid(got) || string(got) != `{"*****":[42,"*****"],"company_id":42,"note":"code *****","ok":true}` {
		t.Errorf("cleanJSON = %s", got)
	}
}

// "outboxgen show 6" is what people type: the answer says how to give the id, before any
// connection, wherever the number stands among the flags. Only a number is taken for an id,
// and it is masked like everything else when it is the DSN's password.
func TestShowBareIDSuggestsFlag(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"6"}, "outboxgen show: give the id with --id: outboxgen show --id 6 (see outboxgen show -h)\n"},
		{[]string{"--dsn", "u:pw@tcp(127.0.0.1:1)/x", "42"}, "outboxgen show: give the id with --id: outboxgen show --id 42 (see outboxgen show -h)\n"},
		{[]string{"7", "--json"}, "outboxgen show: give the id with --id: outboxgen show --id 7 (see outboxgen show -h)\n"},
		{[]string{"--dsn=u:123@tcp(127.0.0.1:1)/x", "123"}, "outboxgen show: give the id with --id: outboxgen show --id ***** (see outboxgen show -h)\n"},
		{[]string{"abc"}, "outboxgen show: show takes no arguments (got 1); the database goes in --dsn or $OUTBOX_DSN (see outboxgen show -h)\n"},
		{[]string{"6", "7"}, "outboxgen show: give ids with --id: outboxgen show --id 6 (see outboxgen show -h)\n"},
		{[]string{"6", "--bogus"}, "outboxgen show: flag provided but not defined: -bogus (see outboxgen show -h)\n"},
	} {
		var out, errb bytes.Buffer
		code := runShow(tc.args, &out, &errb)
		if code != opsExitUsage || out.Len() != 0 || errb.String() != tc.want {
			t.Errorf("show %q: exit %d, stdout %q, stderr %q; want %d and %q", tc.args, code, out.String(), errb.String(), opsExitUsage, tc.want)
		}
	}
}

// show prints a message's headers, sorted, one per line, and in --json.
func TestShowHeaders(t *testing.T) {
	t.Parallel()
	f := fixtures{t: t, db: testdb.Migrated(t)}
	id := f.enqueue("with_headers", outbox.Header("tenant", "acme"), outbox.Header("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"))
	r := runOps(runShow, "--dsn", f.db.DSN, "--id", strconv.FormatInt(int64(id), 10))
	mustExit(t, r, opsExitOK)
	if !strings.Contains(r.stdout, "headers:\n  tenant       acme\n  traceparent  00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\n") {
		t.Errorf("show without the headers block:\n%s", r.stdout)
	}
	r = runOps(runShow, "--dsn", f.db.DSN, "--id", strconv.FormatInt(int64(id), 10), "--json")
	mustExit(t, r, opsExitOK)
	var rec outbox.Record
	if err := json.Unmarshal([]byte(r.stdout), &rec); err != nil || rec.Headers["tenant"] != "acme" {
		t.Errorf("show --json headers = %v, %v", rec.Headers, err)
	}
}

// show prints the payload as stored, never re-indented: indenting costs depth times length, so
// a nested document made a page of megabytes (a 20 KB one nested ten thousand deep, 200 MB).
// The text stops at 64 KiB with a note; --json holds the whole payload, compact.
func TestShowPayloadAsStored(t *testing.T) {
	t.Parallel()
	f := fixtures{t: t, db: testdb.Migrated(t)}
	// 90 levels (MySQL stores at most 100) around 40,000 elements: 80 KB as written.
	payload := strings.Repeat("[", 90) + strings.Repeat("0,", 39999) + "0" + strings.Repeat("]", 90)
	id, err := outbox.Enqueue(context.Background(), f.db, outbox.Message{EventType: "nested", Payload: json.RawMessage(payload)}, outbox.Standalone())
	if err != nil {
		t.Fatal(err)
	}
	rec, err := outbox.Inspect(context.Background(), f.db, id)
	if err != nil {
		t.Fatal(err)
	}
	stored := string(rec.Payload) // MySQL normalizes a JSON column; MariaDB keeps it as written
	r := runOps(runShow, "--dsn", f.db.DSN, "--id", strconv.FormatInt(int64(id), 10))
	mustExit(t, r, opsExitOK)
	if len(r.stdout) > 80<<10 {
		t.Fatalf("show printed %d bytes for a payload of %d", len(r.stdout), len(stored))
	}
	_, shown, _ := strings.Cut(r.stdout, "\npayload:\n    ")
	shown, note, _ := strings.Cut(shown, "\n")
	wantNote := fmt.Sprintf("    ... (payload truncated: the first 65536 of %d bytes; outboxgen show --id %d --json prints it whole)", len(stored), id)
	if len(shown) != 64<<10 || !strings.HasPrefix(stored, shown) || note != wantNote+"\n" {
		t.Errorf("show: want the stored payload's first 64 KiB, then %q; got %d bytes, then %q", wantNote, len(shown), note)
	}

	r = runOps(runShow, "--dsn", f.db.DSN, "--id", strconv.FormatInt(int64(id), 10), "--json")
	mustExit(t, r, opsExitOK)
	if len(r.stdout) > len(stored)+4<<10 {
		t.Fatalf("show --json printed %d bytes for a payload of %d", len(r.stdout), len(stored))
	}
	var got outbox.Record
	var want bytes.Buffer
	if err := json.Compact(&want, rec.Payload); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || string(got.Payload) != want.String() || got.ID != id {
		t.Errorf("show --json: id %d, payload of %d bytes, %v; want %d and the stored payload compact (%d bytes)", got.ID, len(got.Payload), err, id, want.Len())
	}
}
