package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/internal/testdb"
)

// TestConsoleCutsSlowRequests: a client that sends a login's headers, then trickles its body
// a byte at a time, is cut off by the server's read timeout (shortened here to 1s), long
// before its body would be complete; so is one that sends half its headers and stops.
func TestConsoleCutsSlowRequests(t *testing.T) {
	t.Parallel()
	db := testdb.Migrated(t)
	limits := defaultServerLimits
	limits.ReadHeader, limits.Read = time.Second, time.Second
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan net.Addr, 1)
	done := make(chan int, 1)
	go func() {
		done <- serveConsoleLimits(ctx, []string{"--dsn", db.DSN, "--addr", "127.0.0.1:0", "--token", "slow-client-token-0123456789"},
			io.Discard, io.Discard, func(string) string { return "" }, func(a net.Addr) { addr <- a }, limits)
	}()
	t.Cleanup(func() { cancel(); <-done })
	var base string
	select {
	case a := <-addr:
		base = a.String()
	case code := <-done:
		t.Fatalf("console exited %d before serving", code)
	}

	const bodyLen = 600 // at one byte each 50ms: 30s to send
	for name, opening := range map[string]string{
		"slow body": fmt.Sprintf("POST /login HTTP/1.1\r\nHost: %s\r\nContent-Type: application/x-www-form-urlencoded\r\n"+
			"Content-Length: %d\r\n\r\ntoken=", base, bodyLen),
		"slow headers": fmt.Sprintf("GET / HTTP/1.1\r\nHost: %s\r\n", base),
	} {
		t.Run(name, func(t *testing.T) {
			conn, err := net.Dial("tcp", base)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := io.WriteString(conn, opening); err != nil {
				t.Fatal(err)
			}
			// Trickle until the server closes the connection (a write then fails) or the test ends.
			stop := make(chan struct{})
			defer close(stop)
			go func() {
				tick := time.NewTicker(50 * time.Millisecond)
				defer tick.Stop()
				for {
					select {
					case <-stop:
						return
					case <-tick.C:
						if _, err := conn.Write([]byte("X")); err != nil {
							return
						}
					}
				}
			}()
			// The server answers (or not) and closes: reading reaches EOF or a reset. A client
			// deadline far past the server's timeout, and far short of the trickle's end, says
			// the server never cut it off.
			start := time.Now()
			_ = conn.SetReadDeadline(start.Add(15 * time.Second))
			_, err = io.Copy(io.Discard, bufio.NewReader(conn))
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatalf("the connection was still open %v after the request began; want it closed by the 1s read timeout", time.Since(start).Round(time.Second))
			}
		})
	}
}
