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
