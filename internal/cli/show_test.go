package cli

import (
	"bytes"
	"encoding/json"
	"testing"
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
		{[]string{"6", "7"}, "outboxgen show: show takes no arguments (got 2); the database goes in --dsn or $OUTBOX_DSN (see outboxgen show -h)\n"},
		{[]string{"6", "--bogus"}, "outboxgen show: flag provided but not defined: -bogus (see outboxgen show -h)\n"},
	} {
		var out, errb bytes.Buffer
		code := runShow(tc.args, &out, &errb)
		if code != opsExitUsage || out.Len() != 0 || errb.String() != tc.want {
			t.Errorf("show %q: exit %d, stdout %q, stderr %q; want %d and %q", tc.args, code, out.String(), errb.String(), opsExitUsage, tc.want)
		}
	}
}
