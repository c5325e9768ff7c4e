package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

func TestParseDuration(t *testing.T) {
	t.Parallel()
	good := []struct {
		in   string
		want time.Duration
	}{
		{"7d", 7 * 24 * time.Hour},
		{"36h", 36 * time.Hour},
		{"1d12h", 36 * time.Hour},
		{"1.5d", 36 * time.Hour},
		{"2d30m15s", 48*time.Hour + 30*time.Minute + 15*time.Second},
		{"90m", 90 * time.Minute},
		{"1h30m", 90 * time.Minute},
		{"250ms", 250 * time.Millisecond},
		{"0", 0},
		{"0d", 0},
		{"-1d", -24 * time.Hour},
	}
	for _, c := range good {
		got, err := parseDurationDays(c.in)
		if err != nil || got != c.want {
			t.Errorf("parseDurationDays(%q) = %v, %v; want %v, nil", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{"", "d", "7", "7x", "1.2.3d", "d7", "7dd", "1d 2h", "99999999d", "abc"} {
		if got, err := parseDurationDays(in); err == nil {
			t.Errorf("parseDurationDays(%q) = %v, nil; want an error", in, got)
		}
	}
}

func TestFormatAge(t *testing.T) {
	t.Parallel()
	for in, want := range map[time.Duration]string{
		0:                                 "0s",
		1500 * time.Millisecond:           "2s",
		3*time.Minute + 12*time.Second:    "3m12s",
		48 * time.Hour:                    "2d",
		50*time.Hour + 30*time.Second:     "2d2h30s",
		23*time.Hour + 59*time.Minute + 1: "23h59m",
	} {
		if got := formatAge(in); got != want {
			t.Errorf("formatAge(%v) = %q, want %q", in, got, want)
		}
	}
}

func TestResolveDSN(t *testing.T) {
	t.Parallel()
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

	d, err := resolveDSN("app:s3cr3t-P4ss@tcp(db.internal:3306)/shop", env(nil))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := mysql.ParseDSN(d.connect)
	if err != nil {
		t.Fatalf("connect DSN does not parse: %v", err)
	}
	if !cfg.ParseTime || cfg.Loc != time.UTC || cfg.Passwd != "s3cr3t-P4ss" || cfg.DBName != "shop" {
		t.Errorf("connect DSN = %+v; want parseTime, loc=UTC, the password and the database kept", cfg)
	}
	if cfg.Timeout != defaultDialTimeout {
		t.Errorf("dial timeout = %v, want the default %v when the DSN sets none", cfg.Timeout, defaultDialTimeout)
	}
	if strings.Contains(d.shown, "s3cr3t") || d.shown != "app@tcp(db.internal:3306)/shop" {
		t.Errorf("shown DSN = %q; want the password removed and the rest kept", d.shown)
	}

	// An explicit timeout is kept; the environment is used when --dsn is empty.
	d, err = resolveDSN("", env(map[string]string{envDSN: "u:pw@tcp(h:1)/x?timeout=2s&parseTime=false"}))
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ = mysql.ParseDSN(d.connect)
	if cfg.Timeout != 2*time.Second || !cfg.ParseTime || cfg.Addr != "h:1" {
		t.Errorf("from env: %+v; want timeout 2s kept, parseTime forced on, addr h:1", cfg)
	}

	if _, err := resolveDSN("", env(nil)); err == nil || !strings.Contains(err.Error(), envDSN) {
		t.Errorf("no DSN: err = %v; want one naming %s", err, envDSN)
	}

	// A DSN the driver rejects: the error must not echo the password.
	_, err = resolveDSN("u:Zebra-9917@tcp(h:1)/x?parseTime=maybe&Zebra-9917", env(nil))
	if err == nil {
		t.Fatal("a malformed DSN parsed")
	}
	if strings.Contains(err.Error(), "Zebra-9917") {
		t.Errorf("error leaks the password: %v", err)
	}
}

func TestRawPassword(t *testing.T) {
	t.Parallel()
	for dsn, want := range map[string]string{
		"u:pw@tcp(h:1)/db":                  "pw",
		"u:p@ss:w@tcp(h:1)/db?x=1":          "p@ss:w",
		"u:pw@tcp(h:1)/db?x=a@b":            "pw",
		"u:pw@/db":                          "pw",
		"u@tcp(h:1)/db":                     "",
		"/db":                               "",
		"u:pw@tcp(h:1)/db?loc=Asia%2FSeoul": "pw",
	} {
		if got := rawPassword(dsn); got != want {
			t.Errorf("rawPassword(%q) = %q, want %q", dsn, got, want)
		}
		if cfg, err := mysql.ParseDSN(dsn); err == nil && cfg.Passwd != want {
			t.Errorf("rawPassword(%q) = %q, but the driver reads %q", dsn, want, cfg.Passwd)
		}
	}
}

func TestScrub(t *testing.T) {
	t.Parallel()
	pw := "p@ss w/rd"
	got := scrub("a p@ss w/rd b p%40ss+w%2Frd c p@ss%20w%2Frd", passwordForms(pw))
	if strings.Contains(got, "ss w") || strings.Contains(got, "%40ss") {
		t.Errorf("scrub left a form of the password: %q", got)
	}
	// Flag echoes and DSN errors are masked everywhere, word or not.
	if got := scrubAll("flag provided but not defined: -phunter2", passwordForms("hunter2")); got != "flag provided but not defined: -p*****" {
		t.Errorf("scrubAll = %q", got)
	}
	if got := scrub("nothing here", nil); got != "nothing here" {
		t.Errorf("scrub with no secrets changed the text: %q", got)
	}
	// A password that is an ordinary word is masked where it stands alone, not inside names.
	for _, c := range []struct{ pw, in, want string }{
		{"outbox", "Error 1146: Table 'outbox.outbox_messages' doesn't exist", "Error 1146: Table 'outbox.outbox_messages' doesn't exist"},
		{"outbox", "Access denied for user 'outbox'@'%' to database 'outbox'", "Access denied for user '*****'@'%' to database '*****'"},
		{"app", "Unknown database 'app2' for user 'app'@'%'", "Unknown database 'app2' for user '*****'@'%'"},
		{"app", "dial app:app@tcp(db)/x: app", "dial *****:*****@tcp(db)/x: *****"},
		{"s3cr3t", "xs3cr3t s3cr3ty s3cr3t_ s3cr3té", "xs3cr3t s3cr3ty s3cr3t_ s3cr3té"},
		{"Zebra-Owl-4471", "xZebra-Owl-4471y", "x*****y"}, // long: masked even inside a word
		{"s3cr3t", "(s3cr3t)s3cr3t", "(*****)*****"},
		{"s3cr3t", "s3cr3ts3cr3t s3cr3t", "s3cr3ts3cr3t *****"},
		{"aa", "aaa aa", "aaa *****"},
		{"-x-", "a-x-b -x--x-", "a*****b **********"},
		// Dotted names are words; escape sequences are delimiters, not word characters.
		{"email", "event email.bounced, welcome_email", "event email.bounced, welcome_email"},
		{"hunter2", `"line1\nhunter2" %3Ahunter2%40 \u0022hunter2\u0022`, `"line1\n*****" %3A*****%40 \u0022*****\u0022`},
		// Quoted forms: a %q echo and a JSON string escape what the plain form does not.
		{`p"&<1`, `flag "p\"&<1" and {"pw":"p\"\u0026\u003c1"}`, `flag "*****" and {"pw":"*****"}`},
	} {
		if got := scrub(c.in, passwordForms(c.pw)); got != c.want {
			t.Errorf("scrub(%q) with password %q = %q, want %q", c.in, c.pw, got, c.want)
		}
	}
}
