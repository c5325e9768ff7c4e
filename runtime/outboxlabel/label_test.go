package outboxlabel

import "testing"

func TestEscape(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{"orders:42", "orders:42"},
		{"ok:\u00e9", "ok:\u00e9"},
		{"bad\xff", `bad\xFF`},
		{"\xc3(\xe2\x82", `\xC3(\xE2\x82`}, // a cut two-byte and three-byte sequence
		{"a\xffb\u00e9", `a\xFFb` + "\u00e9"},
	} {
		if got := Escape(c.in); got != c.want {
			t.Errorf("Escape(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestKeys(t *testing.T) {
	got := Keys(map[string]int{"ok": 1, "bad\xff": 2, `bad\xFF`: 3, "\u00e9": 4}, func(a, b int) int { return a + b })
	want := map[string]int{"ok": 1, `bad\xFF`: 5, "\u00e9": 4}
	if len(got) != len(want) {
		t.Fatalf("Keys = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("Keys[%q] = %d, want %d (all: %v)", k, got[k], v, got)
		}
	}
}
