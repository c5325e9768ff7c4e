package outbox

import (
	"math"
	"strings"
	"testing"
	"time"
)

// The redelivery window of a few policies, worked out by hand from redeliveryWindow's rule.
func TestRedeliveryWindow(t *testing.T) {
	t.Parallel()
	cfg := func(c Config) Config { return c.withDefaults() }
	for _, tc := range []struct {
		name string
		p    Policy
		c    Config
		want time.Duration
	}{{
		// One attempt: its lease and the reclaim that finds it expired; no wait.
		name: "one attempt",
		p:    Policy{MaxAttempts: 1},
		c:    cfg(Config{StaleAfter: 2 * time.Minute, ReclaimInterval: 30 * time.Second}),
		want: 150 * time.Second,
	}, {
		// 10 attempts of 5m + 1m; waits 1.5s x (1+2+...+256) = 766.5s, each plus a 1s poll.
		name: "defaults",
		p:    Policy{},
		c:    cfg(Config{}),
		want: 60*time.Minute + 766500*time.Millisecond + 9*time.Second,
	}, {
		// 5 attempts of 2m + 30s; waits 1.5m, 3m, then Max 5m twice, each plus a 1s poll.
		name: "backoff reaches Max",
		p:    Policy{MaxAttempts: 5, Backoff: Backoff{Initial: time.Minute, Max: 5 * time.Minute}},
		c:    cfg(Config{StaleAfter: 2 * time.Minute, ReclaimInterval: 30 * time.Second}),
		want: 5*150*time.Second + (90+180+300+300)*time.Second + 4*time.Second,
	}, {
		name: "saturates",
		p:    Policy{MaxAttempts: math.MaxInt32, Backoff: Backoff{Initial: time.Hour, Max: maxDelay}},
		c:    cfg(Config{}),
		want: math.MaxInt64,
	}} {
		if got := redeliveryWindow(tc.p.WithDefaults(), tc.c); got != tc.want {
			t.Errorf("%s: redeliveryWindow = %s, want %s", tc.name, got, tc.want)
		}
	}
}

// A key's expiry: max(7d, the window) when Retention.Inbox is zero, an explicit value at least
// the window as given, KeepForever as given, and a shorter explicit value refused by name.
func TestInboxExpiry(t *testing.T) {
	t.Parallel()
	short := Policy{}.WithDefaults() // a window of about 1h13m
	long := Policy{MaxAttempts: 30, Backoff: Backoff{Initial: time.Second, Max: 24 * time.Hour}}.WithDefaults()
	c := Config{}.withDefaults()
	if got, err := inboxExpiry("e", short, c); err != nil || got != DefaultRetentionInbox {
		t.Errorf("zero Inbox, short window: %s, %v; want %s", got, err, DefaultRetentionInbox)
	}
	lw := redeliveryWindow(long, c)
	if lw <= DefaultRetentionInbox {
		t.Fatalf("the long policy's window %s is not over 7d", lw)
	}
	if got, err := inboxExpiry("e", long, c); err != nil || got != lw {
		t.Errorf("zero Inbox, long window: %s, %v; want the window %s", got, err, lw)
	}
	c.Retention.Inbox = 2 * time.Hour
	if got, err := inboxExpiry("e", short, c); err != nil || got != 2*time.Hour {
		t.Errorf("Inbox 2h over the window: %s, %v; want 2h", got, err)
	}
	_, err := inboxExpiry("order.placed", long, c)
	if err == nil {
		t.Fatal("Inbox 2h under a window of days: no error")
	}
	for _, s := range []string{"Config.Retention.Inbox 2h0m0s", "redelivery window " + lw.String(), `"order.placed"`} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not name %q", err, s)
		}
	}
	c.Retention.Inbox = KeepForever
	if got, err := inboxExpiry("e", long, c); err != nil || got != KeepForever {
		t.Errorf("KeepForever: %s, %v", got, err)
	}
}
