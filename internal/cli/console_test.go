package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/internal/testdb"
)

// lockedBuffer is a bytes.Buffer the console's goroutines may write while the test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// console runs `outboxgen console args...` until the test ends; it returns the base URL and
// the command's output streams.
func console(t *testing.T, env map[string]string, args ...string) (base string, stdout, stderr *lockedBuffer) {
	t.Helper()
	stdout, stderr = &lockedBuffer{}, &lockedBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan net.Addr, 1)
	done := make(chan int, 1)
	go func() {
		done <- serveConsole(ctx, args, stdout, stderr, func(k string) string { return env[k] }, func(a net.Addr) { addr <- a })
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-done:
			if code != opsExitOK {
				t.Errorf("console exited %d after Ctrl-C, want 0\nstderr:\n%s", code, stderr)
			}
		case <-time.After(20 * time.Second):
			t.Error("console did not stop within 20s of its context")
		}
	})
	select {
	case a := <-addr:
		return "http://" + a.String(), stdout, stderr
	case code := <-done:
		t.Fatalf("console exited %d before serving\nstderr:\n%s", code, stderr)
	case <-time.After(30 * time.Second):
		t.Fatal("console did not start within 30s")
	}
	return "", nil, nil
}

func httpGet(t *testing.T, u string, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1]
		} else {
			req.Header.Set(header[i], header[i+1])
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestConsoleNonLoopbackNeedsToken: any address but loopback is refused without a token, and
// any address with a token that is short or easy to guess, before anything listens.
func TestConsoleNonLoopbackNeedsToken(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--addr", "0.0.0.0:0"}, nil, "is not a loopback address"},
		{[]string{"--addr", ":8080", "--allow-writes"}, nil, "could read payloads and retry or purge"},
		{[]string{"--addr", "192.0.2.1:8080"}, nil, "give a --token (or $OUTBOX_CONSOLE_TOKEN)"},
		{[]string{"--addr", "0.0.0.0:0", "--token", "short"}, nil, "at least 16 characters"},
		{[]string{"--addr", "0.0.0.0:0"}, map[string]string{envConsoleToken: "short"}, "at least 16 characters"},
		{[]string{"--addr", "0.0.0.0:0", "--token", "                "}, nil, "only spaces"},
		{[]string{"--addr", "0.0.0.0:0"}, map[string]string{envConsoleToken: "aaaaaaaaaaaaaaaa"}, "only 1 distinct"},
		{[]string{"--addr", "127.0.0.1:0", "--token", "abababababababababababababababab"}, nil, "only 2 distinct"},
		{[]string{"--addr", "nonsense"}, nil, "want host:port"},
	} {
		var out, errb bytes.Buffer
		args := append(tc.args, "--dsn", "u:pw@tcp(127.0.0.1:1)/db")
		code := serveConsole(context.Background(), args, &out, &errb, func(k string) string { return tc.env[k] }, nil)
		if code != opsExitUsage || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("console %v = exit %d, stderr %q; want exit 2 saying %q", tc.args, code, errb.String(), tc.want)
		}
	}
}

// TestConsoleTokenGuardsEveryPage: with a token (from the environment), pages and writes need
// it; the bearer header opens them, and a write with the CSRF token but without the token
// is refused.
func TestConsoleTokenGuardsEveryPage(t *testing.T) {
	t.Parallel()
	db := testdb.Migrated(t)
	f := fixtures{t: t, db: db}
	id := f.failed("payment_failed", 60, "boom")
	token := "console-test-token-0123456789"
	base, _, stderr := console(t, map[string]string{envConsoleToken: token}, "--addr", "127.0.0.1:0", "--allow-writes", "--dsn", db.DSN)

	if code, body := httpGet(t, base+"/"); code != http.StatusUnauthorized || !strings.Contains(body, `name="token"`) {
		t.Fatalf("GET / without the token = %d, want 401 and the login form", code)
	}
	code, body := httpGet(t, base+"/failed", "Authorization", "Bearer "+token)
	if code != 200 || !strings.Contains(body, "payment_failed") {
		t.Fatalf("GET /failed with the token = %d:\n%s", code, body)
	}
	csrf := regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`).FindStringSubmatch(body)
	if csrf == nil {
		t.Fatalf("no CSRF token on the writable failed page:\n%s", body)
	}
	form := url.Values{"csrf": {csrf[1]}, "id": {fmt.Sprint(id)}, "confirm": {"1"}}
	resp, err := http.PostForm(base+"/retry", form)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a write without the token = %d, want 401", resp.StatusCode)
	}
	var status string
	if err := db.QueryRow("SELECT status FROM outbox_messages WHERE id = ?", int64(id)).Scan(&status); err != nil || status != "FAILED" {
		t.Errorf("message is %q (%v) after an unauthenticated write, want FAILED", status, err)
	}
	if !strings.Contains(stderr.String(), `msg="console write refused"`) {
		t.Errorf("the refused write was not logged:\n%s", stderr)
	}
}

// TestConsoleNonLoopbackRequiresToken: a console bound to every interface (0.0.0.0, which
// needs a token to start) serves nothing without the token: a page gets 401 and the login
// form, a retry with the CSRF token gets 401 and changes nothing, whatever name the request
// is addressed to. With the bearer token the same requests pass the auth layer: the page is
// served under a non-loopback name and the retry is done.
func TestConsoleNonLoopbackRequiresToken(t *testing.T) {
	t.Parallel()
	db := testdb.Migrated(t)
	f := fixtures{t: t, db: db}
	id := f.failed("payment_failed", 60, "boom")
	token := "non-loopback-token-0123456789"
	base, stdout, stderr := console(t, nil, "--addr", "0.0.0.0:0", "--allow-writes", "--token", token, "--dsn", db.DSN)
	if !strings.Contains(stdout.String(), "(writes allowed, token required)") {
		t.Errorf("the start line does not say writes allowed and token required: %q", stdout)
	}
	// The listener is on every interface; reach it through loopback, addressed by another name
	// as a request from the network would be.
	_, port, err := net.SplitHostPort(strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	base = "http://127.0.0.1:" + port
	host := "console.ops.example:" + port
	status := func() string {
		t.Helper()
		var s string
		if err := db.QueryRow("SELECT status FROM outbox_messages WHERE id = ?", int64(id)).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	post := func(form url.Values, header ...string) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, base+"/retry", strings.NewReader(form.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}

	for _, p := range []string{"/", "/failed", fmt.Sprintf("/message?id=%d", id), "/jobs"} {
		code, body := httpGet(t, base+p, "Host", host)
		if code != http.StatusUnauthorized || !strings.Contains(body, `name="token"`) || strings.Contains(body, "payment_failed") {
			t.Errorf("GET %s without the token = %d, want 401 with the login form and no outbox data:\n%s", p, code, body)
		}
	}
	code, body := httpGet(t, base+"/failed", "Host", host, "Authorization", "Bearer "+token)
	if code != 200 || !strings.Contains(body, "payment_failed") {
		t.Fatalf("GET /failed with the token, Host %s = %d, want 200 with the FAILED message:\n%s", host, code, body)
	}
	csrf := regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`).FindStringSubmatch(body)
	if csrf == nil {
		t.Fatalf("no CSRF token on the writable failed page:\n%s", body)
	}
	form := url.Values{"csrf": {csrf[1]}, "id": {fmt.Sprint(id)}, "confirm": {"1"}}
	if code := post(form); code != http.StatusUnauthorized {
		t.Errorf("POST /retry with the CSRF token but without the token = %d, want 401", code)
	}
	if code := post(form, "Authorization", "Bearer wrong-token-0123456789"); code != http.StatusUnauthorized {
		t.Errorf("POST /retry with a wrong bearer token = %d, want 401", code)
	}
	if s := status(); s != "FAILED" {
		t.Fatalf("message is %s after writes without the token, want FAILED", s)
	}
	if !strings.Contains(stderr.String(), `msg="console write refused"`) {
		t.Errorf("the refused writes were not logged:\n%s", stderr)
	}
	if code := post(form, "Authorization", "Bearer "+token); code != http.StatusSeeOther {
		t.Errorf("POST /retry with the token and the CSRF token = %d, want 303 (done)", code)
	}
	if s := status(); s != "PENDING" {
		t.Errorf("message is %s after the retry with the token, want PENDING", s)
	}
}

// TestConsoleLoopbackAnswersOnlyLoopbackNames: without a token, a request addressed to another
// name (a DNS-rebinding page) is refused; localhost and 127.0.0.1 are served.
func TestConsoleLoopbackAnswersOnlyLoopbackNames(t *testing.T) {
	t.Parallel()
	db := testdb.Migrated(t)
	base, stdout, _ := console(t, nil, "--dsn", db.DSN, "--addr", "127.0.0.1:0")
	if !strings.Contains(stdout.String(), "(read-only, no token (loopback))") {
		t.Errorf("the start line does not say read-only and loopback: %q", stdout)
	}
	port := strings.TrimPrefix(base, "http://127.0.0.1:")
	for host, want := range map[string]int{
		"127.0.0.1:" + port: 200, "localhost:" + port: 200, "[::1]:" + port: 200,
		"evil.example:" + port: http.StatusMisdirectedRequest, "evil.example": http.StatusMisdirectedRequest,
	} {
		if code, _ := httpGet(t, base+"/", "Host", host); code != want {
			t.Errorf("Host %s = %d, want %d", host, code, want)
		}
	}
}

// TestConsolePasswordNeverShown: the DSN's password is in neither the start line, nor the
// pages (title, a payload and a last_error that carry it), nor the log.
func TestConsolePasswordNeverShown(t *testing.T) {
	t.Parallel()
	db := testdb.Migrated(t)
	pw := "Console-Pw-7f3a9c21"
	dsn := db.User(t, pw, "ALL")
	f := fixtures{t: t, db: db}
	id := f.failed("payment_failed", 60, "dial app:"+pw+"@tcp(db): refused")
	db.MustExec(t, "UPDATE outbox_messages SET payload = ? WHERE id = ?", `{"dsn":"app:`+pw+`@tcp(x)/y"}`, int64(id))
	base, stdout, stderr := console(t, nil, "--dsn", dsn, "--addr", "127.0.0.1:0", "--allow-writes")
	var pages strings.Builder
	for _, p := range []string{"/", "/failed", fmt.Sprintf("/message?id=%d", id), "/jobs"} {
		_, body := httpGet(t, base+p)
		pages.WriteString(body)
	}
	resp, err := http.PostForm(base+"/retry", url.Values{"id": {fmt.Sprint(id)}}) // refused: no CSRF token; logged
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for name, text := range map[string]string{"stdout": stdout.String(), "stderr": stderr.String(), "pages": pages.String()} {
		if strings.Contains(text, pw) {
			t.Errorf("the password appears in %s:\n%s", name, text)
		}
	}
	if !strings.Contains(pages.String(), "dial app:*****@tcp(db): refused") {
		t.Errorf("last_error is not shown masked:\n%s", pages.String())
	}
}

func TestLoopbackAddr(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8080": true, "127.1.2.3:0": true, "[::1]:80": true, "localhost:8080": true, "LOCALHOST:1": true,
		"0.0.0.0:8080": false, ":8080": false, "[::]:80": false, "192.0.2.1:80": false, "example.com:80": false,
	} {
		got, err := loopbackAddr(addr)
		if err != nil || got != want {
			t.Errorf("loopbackAddr(%q) = %v, %v; want %v", addr, got, err, want)
		}
	}
}
