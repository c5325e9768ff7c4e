// Package proxy is a TCP proxy for fault tests: clients connect to Addr, bytes flow to the
// target, and the test can Pause the flow (both directions stall: a network partition that
// TCP does not notice), Resume it, or Drop every open connection (both sides see a reset).
// PauseAfter aims a pause at one moment of a client's conversation (say, just after the
// server received a particular COMMIT, before its answer gets back). Answered tells when such
// a moment has passed, and Held when a pause holds traffic, so a test waits on them.
package proxy

import (
	"bytes"
	"net"
	"sync"
	"sync/atomic"
)

// Proxy forwards every accepted connection to Target.
type Proxy struct {
	Target string

	ln     net.Listener
	mu     sync.Mutex
	cond   *sync.Cond
	paused bool
	closed bool
	trap   *trap // armed by PauseAfter; nil when none
	conns  map[*pair]struct{}
	wg     sync.WaitGroup

	watches []*watch // armed by Answered; removed once fired

	accepted atomic.Int64
	dropped  atomic.Int64
	held     int // chunks read and waiting for Resume; guarded by mu
}

type pair struct {
	client, server net.Conn
	dead           atomic.Bool
	primed         bool // this client sent the trap's first pattern (used by its client->server pipe only)
}

// watch is Answered's one-shot trigger. Its fields are guarded by the proxy's mu.
type watch struct {
	first, then []byte
	primed      map[*pair]bool // connections that sent first
	asked       map[*pair]bool // connections that sent then after first: their next answer fires
	fired       chan struct{}
}

// trap is PauseAfter's one-shot trigger.
type trap struct {
	first, then []byte
	fired       chan struct{}
}

func (p *pair) close() {
	p.dead.Store(true)
	p.client.Close()
	p.server.Close()
}

// Start listens on a free local port and forwards to target.
func Start(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{Target: target, ln: ln, conns: map[*pair]struct{}{}}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is where clients connect.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Accepted counts connections accepted so far; Dropped counts those closed by Drop.
func (p *Proxy) Accepted() int64 { return p.accepted.Load() }

// Dropped counts connections closed by Drop.
func (p *Proxy) Dropped() int64 { return p.dropped.Load() }

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // listener closed
		}
		p.accepted.Add(1)
		p.wg.Add(1)
		go p.serve(c)
	}
}

func (p *Proxy) serve(c net.Conn) {
	defer p.wg.Done()
	// While paused, a new connection is accepted but not dialed through: the client's
	// handshake stalls just like an established connection's traffic.
	if !p.waitFlowing(nil) {
		c.Close()
		return
	}
	s, err := net.Dial("tcp", p.Target)
	if err != nil {
		c.Close()
		return
	}
	pr := &pair{client: c, server: s}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		pr.close()
		return
	}
	p.conns[pr] = struct{}{}
	p.mu.Unlock()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.pipe(pr, s, c, true) }()
	go func() { defer wg.Done(); p.pipe(pr, c, s, false) }()
	wg.Wait()
	p.mu.Lock()
	delete(p.conns, pr)
	p.mu.Unlock()
}

// pipe copies src to dst, holding each chunk while the proxy is paused. upstream is the
// client->server direction, the one PauseAfter watches.
func (p *Proxy) pipe(pr *pair, dst, src net.Conn, upstream bool) {
	defer pr.close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.waitFlowing(pr) {
				return
			}
			// The trap is checked before the chunk is written: the pause must be in place
			// before the server can answer, or the downstream pipe may pass the answer on
			// before the pause begins. The trapping chunk itself still goes through.
			if upstream {
				p.watch(pr, buf[:n])
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
			if !upstream {
				p.answered(pr)
			}
		}
		if err != nil {
			return // EOF, reset or closed by Drop: close both sides
		}
	}
}

// Held is the number of chunks read from a connection and held by a pause: traffic that a
// Drop now would cut off in flight.
func (p *Proxy) Held() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held
}

// waitFlowing blocks while paused; false when the proxy is closed or pr was dropped.
func (p *Proxy) waitFlowing(pr *pair) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pr != nil && p.paused {
		p.held++
		defer func() { p.held-- }()
	}
	for p.paused && !p.closed && (pr == nil || !pr.dead.Load()) {
		p.cond.Wait()
	}
	return !p.closed && (pr == nil || !pr.dead.Load())
}

// PauseAfter arms a one-shot pause: once a client has sent a chunk containing first and, as
// its very next chunk on that connection, one containing then (a request/response protocol
// sends the next request after the answer), that second chunk is delivered to the server and
// the proxy pauses at once (as Pause) until Resume. The server has the request; its answer
// is held. The channel is closed when the pause began. Arming again replaces an unfired trap.
func (p *Proxy) PauseAfter(first, then []byte) <-chan struct{} {
	t := &trap{first: append([]byte(nil), first...), then: append([]byte(nil), then...), fired: make(chan struct{})}
	p.mu.Lock()
	p.trap = t
	for pr := range p.conns {
		pr.primed = false
	}
	p.mu.Unlock()
	return t.fired
}

// Answered arms a one-shot watch: once a client has sent a chunk containing first and, in a
// later chunk on that connection, one containing then, the channel is closed when the
// server's next answer on that connection has been passed to the client. Traffic is not held.
func (p *Proxy) Answered(first, then []byte) <-chan struct{} {
	w := &watch{first: append([]byte(nil), first...), then: append([]byte(nil), then...),
		primed: map[*pair]bool{}, asked: map[*pair]bool{}, fired: make(chan struct{})}
	p.mu.Lock()
	p.watches = append(p.watches, w)
	p.mu.Unlock()
	return w.fired
}

// answered fires the watches waiting for an answer on pr.
func (p *Proxy) answered(pr *pair) {
	p.mu.Lock()
	defer p.mu.Unlock()
	kept := p.watches[:0]
	for _, w := range p.watches {
		if w.asked[pr] {
			close(w.fired)
			continue
		}
		kept = append(kept, w)
	}
	p.watches = kept
}

// watch checks a chunk about to be delivered upstream against the armed trap and watches.
func (p *Proxy) watch(pr *pair, chunk []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, w := range p.watches {
		if w.primed[pr] && bytes.Contains(chunk, w.then) {
			w.asked[pr] = true
		}
		if bytes.Contains(chunk, w.first) {
			w.primed[pr] = true
		}
	}
	t := p.trap
	if t == nil {
		return
	}
	if pr.primed && bytes.Contains(chunk, t.then) {
		p.paused = true
		p.trap = nil
		close(t.fired)
		return
	}
	pr.primed = bytes.Contains(chunk, t.first)
}

// Pause stalls all traffic, new connections included, until Resume or Drop.
func (p *Proxy) Pause() {
	p.mu.Lock()
	p.paused = true
	p.mu.Unlock()
}

// Resume lets traffic flow again.
func (p *Proxy) Resume() {
	p.mu.Lock()
	p.paused = false
	p.cond.Broadcast()
	p.mu.Unlock()
}

// Drop closes every open connection (both ends) and returns how many. Data held by a pause is
// discarded with them; the pause state itself is unchanged.
func (p *Proxy) Drop() int {
	p.mu.Lock()
	n := 0
	for pr := range p.conns {
		pr.close()
		delete(p.conns, pr)
		n++
	}
	// Wake pipes held by a pause so they see their pair is dead.
	p.cond.Broadcast()
	p.mu.Unlock()
	p.dropped.Add(int64(n))
	return n
}

// Open is the number of connections currently proxied.
func (p *Proxy) Open() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// Close stops accepting, drops every connection and waits for the goroutines.
func (p *Proxy) Close() error {
	err := p.ln.Close()
	p.mu.Lock()
	p.closed = true
	p.cond.Broadcast()
	p.mu.Unlock()
	p.Drop()
	p.wg.Wait()
	return err
}
