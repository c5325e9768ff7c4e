package proxy

import (
	"bufio"
	"net"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/internal/testutil"
)

// echo starts a line-echo server and returns its address.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// start starts a proxy in front of an echo server and connects a client through it.
func start(t *testing.T) (*Proxy, net.Conn, *bufio.Reader) {
	t.Helper()
	p, err := Start(echo(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return p, c, bufio.NewReader(c)
}

func roundTrip(c net.Conn, r *bufio.Reader, msg string, wait time.Duration) (string, error) {
	if err := c.SetDeadline(time.Now().Add(wait)); err != nil {
		return "", err
	}
	if _, err := c.Write([]byte(msg + "\n")); err != nil {
		return "", err
	}
	return r.ReadString('\n')
}

func TestPauseResumeDrop(t *testing.T) {
	p, c, r := start(t)
	if got, err := roundTrip(c, r, "one", 2*time.Second); err != nil || got != "one\n" {
		t.Fatalf("flowing: got %q, %v; want the echo", got, err)
	}

	p.Pause()
	if got, err := roundTrip(c, r, "two", 300*time.Millisecond); err == nil {
		t.Fatalf("paused: got %q; want a timeout (traffic must stall)", got)
	}
	p.Resume()
	// The stalled line is delivered after Resume, not lost: a pause is a stall, not a drop.
	if err := c.SetDeadline(time.Now().Add(2 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if got, err := r.ReadString('\n'); err != nil || got != "two\n" {
		t.Fatalf("after resume: got %q, %v; want the stalled echo", got, err)
	}

	if n := p.Drop(); n != 1 {
		t.Fatalf("Drop closed %d connections, want 1", n)
	}
	if got, err := roundTrip(c, r, "three", 2*time.Second); err == nil {
		t.Fatalf("after drop: got %q; want an error on the dropped connection", got)
	}

	// Drop while paused releases the held connection too.
	c2, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	r2 := bufio.NewReader(c2)
	if _, err := roundTrip(c2, r2, "four", 2*time.Second); err != nil {
		t.Fatalf("new connection: %v", err)
	}
	p.Pause()
	if _, err := c2.Write([]byte("five\n")); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 2*time.Second, "the pause to hold the written line", func() bool { return p.Held() == 1 })
	p.Drop()
	p.Resume()
	if err := c2.SetDeadline(time.Now().Add(2 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if got, err := r2.ReadString('\n'); err == nil {
		t.Fatalf("dropped while paused: got %q; want an error", got)
	}
	testutil.Eventually(t, 2*time.Second, "the dropped line to be let go", func() bool { return p.Held() == 0 })
	if p.Dropped() != 2 || p.Accepted() != 2 {
		t.Fatalf("accepted=%d dropped=%d, want 2 and 2", p.Accepted(), p.Dropped())
	}
}

// PauseAfter pauses right after the server got the trap's second request, holding its answer.
func TestPauseAfter(t *testing.T) {
	p, c, r := start(t)
	fired := p.PauseAfter([]byte("mark"), []byte("commit"))
	// "commit" not right after "mark" does not fire; neither does "mark" alone.
	for _, msg := range []string{"commit", "mark", "other", "commit", "mark"} {
		if got, err := roundTrip(c, r, msg, 2*time.Second); err != nil || got != msg+"\n" {
			t.Fatalf("%s: got %q, %v; want the echo (the trap must not fire yet)", msg, got, err)
		}
	}
	if got, err := roundTrip(c, r, "commit", 300*time.Millisecond); err == nil {
		t.Fatalf("commit after mark: got %q; want the answer held", got)
	}
	select {
	case <-fired:
	default:
		t.Fatal("the trap did not report firing")
	}
	p.Resume()
	if err := c.SetDeadline(time.Now().Add(2 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if got, err := r.ReadString('\n'); err != nil || got != "commit\n" {
		t.Fatalf("after resume: got %q, %v; want the held answer", got, err)
	}
	// One shot: the same sequence passes now.
	for _, msg := range []string{"mark", "commit"} {
		if got, err := roundTrip(c, r, msg, 2*time.Second); err != nil || got != msg+"\n" {
			t.Fatalf("after firing, %s: got %q, %v", msg, got, err)
		}
	}
}

// Answered fires once the server's answer to the watched request reached the client.
func TestAnswered(t *testing.T) {
	p, c, r := start(t)
	answered := p.Answered([]byte("mark"), []byte("commit"))
	// "commit" before "mark" does not fire; "mark" alone neither.
	for _, msg := range []string{"commit", "mark", "other"} {
		if _, err := roundTrip(c, r, msg, 2*time.Second); err != nil {
			t.Fatalf("%s: %v", msg, err)
		}
		select {
		case <-answered:
			t.Fatalf("fired after %q; want it only after the answer to a commit that follows a mark", msg)
		default:
		}
	}
	p.Pause()
	if _, err := c.Write([]byte("commit\n")); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 2*time.Second, "the pause to hold the commit", func() bool { return p.Held() == 1 })
	select {
	case <-answered:
		t.Fatal("fired while the commit was held; want it once the answer is through")
	default:
	}
	p.Resume()
	select {
	case <-answered:
	case <-time.After(5 * time.Second):
		t.Fatal("the answer to the commit went through and the watch did not fire")
	}
	if err := c.SetDeadline(time.Now().Add(2 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if got, err := r.ReadString('\n'); err != nil || got != "commit\n" {
		t.Fatalf("after resume: got %q, %v; want the echo", got, err)
	}
}
