package outboxconsole

import (
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Wrong tokens are throttled: each client address, and every client together, has a bucket
// of tries that a wrong token empties and time refills. A try while a bucket is empty is
// answered 429 without looking at the token, so a guesser learns nothing from it. A right
// token costs nothing (its try is given back), and a session cookie is never throttled: a
// person already logged in is not locked out by someone guessing elsewhere.
//
// A client is the connection's remote address (an IPv6 address by its /64, which one host
// usually holds whole). Headers such as X-Forwarded-For are not trusted: behind a proxy every
// client is the proxy, and the per-client limit acts as a second global one.
const (
	clientBurst = 10              // wrong tries a client may make at once
	clientEvery = 6 * time.Second // then one more each clientEvery (10 a minute)
	globalBurst = 100             // wrong tries all clients together may make at once
	globalEvery = time.Second / 10

	// maxClients is how many client buckets are kept before the full ones are dropped. A
	// bucket is made only when the global one has a try left, so they grow at most at its rate
	// and refill within clientBurst*clientEvery.
	maxClients = 1024
)

type throttle struct {
	now func() time.Time

	mu      sync.Mutex
	all     bucket
	clients map[string]*bucket
}

type bucket struct {
	tries     float64
	at        time.Time
	throttled bool // the last try was refused: log only the first refusal
}

func newThrottle(now func() time.Time) *throttle {
	return &throttle{now: now, clients: map[string]*bucket{}}
}

// refill brings b's tries up to date at now.
func (b *bucket) refill(now time.Time, every time.Duration, burst float64) {
	if b.at.IsZero() {
		b.tries, b.at = burst, now
		return
	}
	if now.After(b.at) {
		b.tries = min(burst, b.tries+float64(now.Sub(b.at))/float64(every))
		b.at = now
	}
}

// wait is how long until b has a whole try again.
func (b *bucket) wait(every time.Duration) time.Duration {
	return max(time.Duration((1-b.tries)*float64(every)), time.Second)
}

// try checks a token that client sent with right, unless client or everyone is out of tries.
// It returns whether the token is right; when refused, how long to wait (and first, when this
// is the client's first refusal in a row: the one worth a log line). A wrong token spends a
// try; a right one spends none. right runs under the lock: a compare, nothing slow.
func (t *throttle) try(client string, right func() bool) (ok bool, wait time.Duration, first bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	t.all.refill(now, globalEvery, globalBurst)
	if t.all.tries < 1 {
		first = !t.all.throttled
		t.all.throttled = true
		return false, t.all.wait(globalEvery), first
	}
	t.all.throttled = false
	b := t.clients[client]
	if b == nil {
		if len(t.clients) >= maxClients {
			t.sweep(now)
		}
		b = &bucket{}
		t.clients[client] = b
	}
	b.refill(now, clientEvery, clientBurst)
	if b.tries < 1 {
		first = !b.throttled
		b.throttled = true
		return false, b.wait(clientEvery), first
	}
	b.throttled = false
	if right() {
		return true, 0, false
	}
	b.tries--
	t.all.tries--
	return false, 0, false
}

// sweep drops the buckets that time has refilled: they are as a new client's.
func (t *throttle) sweep(now time.Time) {
	for k, b := range t.clients {
		if b.refill(now, clientEvery, clientBurst); b.tries >= clientBurst {
			delete(t.clients, k)
		}
	}
}

// clientOf is the throttle's key for a request: its remote IP, an IPv6 one cut to its /64.
func clientOf(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return host
	}
	if v4 := ip.To4(); v4 != nil {
		return v4.String()
	}
	return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
}

// tooManyTries answers a request refused by the throttle.
func tooManyTries(w http.ResponseWriter, wait time.Duration) {
	w.Header().Set("Retry-After", retryAfter(wait))
	http.Error(w, "429 too many requests: too many wrong tokens; try again in "+retryAfter(wait)+"s", http.StatusTooManyRequests)
}

// retryAfter is wait in whole seconds, rounded up.
func retryAfter(wait time.Duration) string {
	return strconv.FormatInt(int64((wait+time.Second-1)/time.Second), 10)
}
