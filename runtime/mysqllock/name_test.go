package mysqllock

import (
	"context"
	"strings"
	"testing"
)

// The vectors are a contract: two versions of a service must take the same server lock for the
// same name. The hashed ones were computed with sha256sum, not with this code.
func TestServerName(t *testing.T) {
	t.Parallel()
	sixtyFour := strings.Repeat("a", 64)
	cases := []struct{ in, want string }{
		{"job:billing", "job:billing"},
		{"user-email:a.b_c-d", "user-email:a.b_c-d"},
		{"0123456789", "0123456789"},
		{sixtyFour, sixtyFour},
		{"", ""},
		{sixtyFour + "a", "h:635361c48bb9eab14198e76ea8ab7f1a41685d6ad62aa9146d301d4f17eb0a"},
		{"a|b", "h:0eab8a0a3380abf4c7d1fb0b43b66aafbb64a4b953e4eb2dccca579461912d"},
		{"User@Example.com", "h:24299c4b99779e0b3e7742511429c3faa5f9419efb020605493afe2e70d5e6"},
		{"job:Billing", "h:3853e910f5289a1b4d665d830228ab61595b72b7b73b5c2f8a19cb862eb5d8"}, // case matters
		{"한글", "h:bd87f9bb68b67d2fa1cb82b6751820e946d5b1316d25d5fd96512fb4be44a2"},
		{"x y", "h:887fcea6a80333c6c02ae7e79735f0edad8d811f0b61431495f796f4bf6a7c"},
	}
	for _, c := range cases {
		got := ServerName(c.in)
		if got != c.want {
			t.Errorf("ServerName(%q) = %q, want %q", c.in, got, c.want)
		}
		if len(got) > 64 {
			t.Errorf("ServerName(%q) is %d bytes, MySQL allows 64", c.in, len(got))
		}
	}
	// A trailing newline must not sneak through the pattern ($ is end of text in Go's regexp).
	if got := ServerName("job\n"); !strings.HasPrefix(got, "h:") {
		t.Errorf(`ServerName("job\n") = %q, want it hashed`, got)
	}
}

func TestEmptyNameAndBadArguments(t *testing.T) {
	t.Parallel()
	l := New(nil) // never reaches the database
	fn := func(context.Context) error { return nil }
	if ran, err := l.TryDo(context.Background(), "", fn); ran || err == nil {
		t.Errorf("TryDo with an empty name: ran=%v err=%v, want an error", ran, err)
	}
	if ran, err := l.Do(context.Background(), "", 0, fn); ran || err == nil {
		t.Errorf("Do with an empty name: ran=%v err=%v, want an error", ran, err)
	}
	if ran, err := l.Do(context.Background(), "x", -1, fn); ran || err == nil {
		t.Errorf("Do with a negative wait: ran=%v err=%v, want an error", ran, err)
	}
	if ran, err := l.TryDo(context.Background(), "x", nil); ran || err == nil {
		t.Errorf("TryDo with a nil fn: ran=%v err=%v, want an error", ran, err)
	}
}
