package termesc

import (
	"encoding/json"
	"testing"
)

func TestLineAndText(t *testing.T) {
	for _, tc := range []struct {
		in, line, text string
	}{
		{"email.sent", "email.sent", "email.sent"},
		{"café ünïcode ✓", "café ünïcode ✓", "café ünïcode ✓"},
		{`C:\path "quoted" \x1b`, `C:\path "quoted" \x1b`, `C:\path "quoted" \x1b`},
		{"webhook 500: \x1b[2K\r\x1b[8m", `webhook 500: \x1b[2K\r\x1b[8m`, `webhook 500: \x1b[2K\r\x1b[8m`},
		{"x\x1b]0;owned\a", `x\x1b]0;owned\a`, `x\x1b]0;owned\a`},
		{"a\nb\tc", `a\nb\tc`, "a\nb\tc"},
		{"nul\x00del\x7f", `nul\x00del\x7f`, `nul\x00del\x7f`},
		{"x\xFF", `x\xFF`, `x\xFF`},
		{"x\xFE\x9B", `x\xFE\x9B`, `x\xFE\x9B`},
		{"csi\u009b31m", `csi\u009b31m`, `csi\u009b31m`},
		{"check: \u202eko", `check: \u202eko`, `check: \u202eko`},
		{"", "", ""},
	} {
		if got := Line(tc.in); got != tc.line {
			t.Errorf("Line(%q) = %q, want %q", tc.in, got, tc.line)
		}
		if got := Text(tc.in); got != tc.text {
			t.Errorf("Text(%q) = %q, want %q", tc.in, got, tc.text)
		}
	}
}

// JSON escapes inside strings only what encoding/json leaves raw, and the document decodes to
// the same value.
func TestJSON(t *testing.T) {
	v := map[string]string{"k\u0085": "csi\u009b[31m del\x7f \u202e ok \x1b"}
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	got := JSON(raw)
	want := `{"k\u0085":"csi\u009b[31m del\u007f \u202e ok \u001b"}`
	if string(got) != want {
		t.Errorf("JSON = %s, want %s", got, want)
	}
	var back map[string]string
	if err := json.Unmarshal(got, &back); err != nil || back["k\u0085"] != v["k\u0085"] {
		t.Errorf("JSON output decodes to %q, %v; want %q", back, err, v)
	}
	if got := JSON([]byte(`{"a":"x` + "\xff" + `"}`)); string(got) != `{"a":"x\ufffd"}` {
		t.Errorf("JSON with a byte that is not UTF-8 = %s", got)
	}
	plain := []byte(`{"a": [1, "b"]}`)
	if got := JSON(plain); &got[0] != &plain[0] {
		t.Error("JSON copied a document that needs no escaping")
	}
}
