package outboxconsole

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestWrongLoginsThrottled: of a burst of 100 wrong logins from one address, all but the
// first clientBurst are refused with 429 and Retry-After, and so is the right token while the
// address is throttled (the answer says nothing about the token). A session cookie made before
// keeps working meanwhile. Once the clock has refilled one try, the right token logs in; a
// wrong bearer token is throttled as a wrong login is.
func TestWrongLoginsThrottled(t *testing.T) {
	t.Parallel()
	clock := &testClock{}
	b := setup(t, WithToken(testToken), withClock(clock))
	login := func(token string) response {
		return b.post("/login", url.Values{"token": {token}, "next": {"./"}})
	}
	session := login(testToken).header.Get("Set-Cookie")
	if session == "" {
		t.Fatal("the first login set no cookie")
	}
	cookie := strings.SplitN(session, ";", 2)[0]

	counts := map[int]int{}
	for i := 0; i < 100; i++ {
		r := login(fmt.Sprintf("wrong-token-%03d", i))
		counts[r.status]++
		if r.status == http.StatusTooManyRequests && r.header.Get("Retry-After") == "" {
			t.Errorf("a throttled login has no Retry-After")
		}
	}
	if counts[http.StatusUnauthorized] != clientBurst || counts[http.StatusTooManyRequests] != 100-clientBurst {
		t.Errorf("100 wrong logins: %v, want %d answered 401 and %d answered 429", counts, clientBurst, 100-clientBurst)
	}
	if r := login(testToken); r.status != http.StatusTooManyRequests || r.header.Get("Set-Cookie") != "" {
		t.Errorf("the right token while throttled = %d (cookie %q), want 429 and no cookie", r.status, r.header.Get("Set-Cookie"))
	}
	if r := b.get("/", "Authorization", "Bearer wrong-bearer-token"); r.status != http.StatusTooManyRequests {
		t.Errorf("a wrong bearer token while throttled = %d, want 429", r.status)
	}
	if r := b.get("/", "Cookie", cookie); r.status != http.StatusOK {
		t.Errorf("the session cookie while logins are throttled = %d, want 200", r.status)
	}
	if n := strings.Count(b.logs.String(), `msg="console logins throttled"`); n != 1 {
		t.Errorf("%d 'console logins throttled' log lines, want 1 for the run:\n%s", n, b.logs)
	}

	clock.advance(clientEvery)
	if r := login(testToken); r.status != http.StatusSeeOther || r.header.Get("Set-Cookie") == "" {
		t.Errorf("the right token after %v = %d, want 303 with the session cookie", clientEvery, r.status)
	}
	// The right token spent nothing: the refilled try is still there for a wrong one.
	if r := b.get("/", "Authorization", "Bearer wrong-bearer-token"); r.status != http.StatusUnauthorized {
		t.Errorf("a wrong bearer token with a try left = %d, want 401", r.status)
	}
	if r := b.get("/", "Authorization", "Bearer wrong-bearer-token"); r.status != http.StatusTooManyRequests {
		t.Errorf("a wrong bearer token after the refilled try = %d, want 429", r.status)
	}
}

// TestThrottleGlobal: wrong tokens from many addresses together are held to the global
// bucket, and a right one from a fresh address still goes through only while it has tries.
func TestThrottleGlobal(t *testing.T) {
	clock := &testClock{}
	th := newThrottle(clock.now)
	wrong := func() bool { return false }
	refused := 0
	for i := 0; i < 3*globalBurst; i++ {
		if _, wait, _ := th.try(fmt.Sprintf("192.0.2.%d", i%250), wrong); wait > 0 {
			refused++
		}
	}
	if refused != 2*globalBurst {
		t.Errorf("%d wrong tries from 250 addresses: %d refused, want %d (the global burst is %d)", 3*globalBurst, refused, 2*globalBurst, globalBurst)
	}
	clock.advance(globalEvery)
	if ok, wait, _ := th.try("198.51.100.1", func() bool { return true }); !ok || wait != 0 {
		t.Errorf("the right token after one global refill = %v, wait %v; want accepted", ok, wait)
	}
	if len(th.clients) > maxClients {
		t.Errorf("%d client buckets kept, want at most %d", len(th.clients), maxClients)
	}
}

func TestClientOf(t *testing.T) {
	for addr, want := range map[string]string{
		"192.0.2.7:5555":                "192.0.2.7",
		"[2001:db8:1:2:aaaa::1]:443":    "2001:db8:1:2::/64",
		"[2001:db8:1:2:bbbb:cccc::9]:1": "2001:db8:1:2::/64",
		"[2001:db8:1:3::1]:1":           "2001:db8:1:3::/64",
		"[::ffff:192.0.2.7]:80":         "192.0.2.7",
		"not-an-address":                "not-an-address",
	} {
		if got := clientOf(&http.Request{RemoteAddr: addr}); got != want {
			t.Errorf("clientOf(%q) = %q, want %q", addr, got, want)
		}
	}
}
