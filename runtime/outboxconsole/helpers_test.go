package outboxconsole

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/internal/testdb"
	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// bundle is one test's console over its own database (River's setup(t) shape).
type bundle struct {
	t    *testing.T
	db   *testdb.DB
	c    *Console
	srv  *httptest.Server
	logs *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// setup starts a console over a fresh migrated database. The sampler's interval is an hour,
// so it samples once at the start and tests call sampleOnce themselves.
func setup(t *testing.T, opts ...Option) *bundle {
	t.Helper()
	db := testdb.Migrated(t)
	return setupOn(t, db, opts...)
}

func setupOn(t *testing.T, db *testdb.DB, opts ...Option) *bundle {
	t.Helper()
	logs := &syncBuffer{}
	all := append([]Option{WithLogger(slog.New(slog.NewTextHandler(logs, nil))), WithSampleInterval(time.Hour)}, opts...)
	c := New(db.DB, all...)
	t.Cleanup(func() { c.Close() })
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	return &bundle{t: t, db: db, c: c, srv: srv, logs: logs}
}

// client never follows redirects: the tests look at them.
var client = &http.Client{
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	Timeout:       30 * time.Second,
}

type response struct {
	status   int
	body     string
	location string
	header   http.Header
}

func (b *bundle) do(req *http.Request) response {
	b.t.Helper()
	resp, err := client.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	return response{status: resp.StatusCode, body: string(body), location: resp.Header.Get("Location"), header: resp.Header}
}

func (b *bundle) get(path string, header ...string) response {
	b.t.Helper()
	req, err := http.NewRequest(http.MethodGet, b.srv.URL+path, nil)
	if err != nil {
		b.t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return b.do(req)
}

// post sends a form as a browser on the console's own page would (Origin and Sec-Fetch-Site
// of the console), plus the given headers, which may override those.
func (b *bundle) post(path string, form url.Values, header ...string) response {
	b.t.Helper()
	req, err := http.NewRequest(http.MethodPost, b.srv.URL+path, strings.NewReader(form.Encode()))
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", b.srv.URL)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	for i := 0; i+1 < len(header); i += 2 {
		if header[i+1] == "" {
			req.Header.Del(header[i])
		} else {
			req.Header.Set(header[i], header[i+1])
		}
	}
	return b.do(req)
}

func (b *bundle) mustContain(r response, wants ...string) {
	b.t.Helper()
	for _, w := range wants {
		if !strings.Contains(r.body, w) {
			b.t.Errorf("the page lacks %q:\n%s", w, r.body)
		}
	}
}

// ---- rows ----

func secs(n int) *int { return &n }

// insert writes a row by hand, with times as offsets in seconds from the database clock.
func (b *bundle) insert(eventType, status, payload string, attempts int, created, due, claimed, reclaimAfter, sent, failed *int, lastError string) outbox.MessageID {
	b.t.Helper()
	ts := func(off *int) string {
		if off == nil {
			return "NULL"
		}
		return fmt.Sprintf("TIMESTAMPADD(SECOND, %d, UTC_TIMESTAMP(6))", *off)
	}
	if created == nil {
		created = secs(0)
	}
	if due == nil {
		due = created
	}
	var token, lastErr any
	if claimed != nil {
		token = "fixture-token"
	}
	if lastError != "" {
		lastErr = lastError
	}
	res := b.db.MustExec(b.t, `INSERT INTO outbox_messages
		(event_type, payload, status, attempts, max_attempts, next_attempt_at, claimed_at, reclaim_after,
		 claim_token, last_error, created_at, sent_at, failed_at)
		VALUES (?, ?, ?, ?, 10, `+ts(due)+`, `+ts(claimed)+`, `+ts(reclaimAfter)+`, ?, ?, `+
		ts(created)+`, `+ts(sent)+`, `+ts(failed)+`)`, eventType, payload, status, attempts, token, lastErr)
	id, err := res.LastInsertId()
	if err != nil {
		b.t.Fatal(err)
	}
	return outbox.MessageID(id)
}

func (b *bundle) enqueue(eventType, payload string, opts ...outbox.EnqueueOption) outbox.MessageID {
	b.t.Helper()
	id, err := outbox.Enqueue(context.Background(), b.db, outbox.Message{EventType: eventType, Payload: json.RawMessage(payload)},
		append(opts, outbox.Standalone())...)
	if err != nil {
		b.t.Fatalf("enqueue %s: %v", eventType, err)
	}
	return id
}

func (b *bundle) processing(eventType string, ago, lease int) outbox.MessageID {
	b.t.Helper()
	return b.insert(eventType, "PROCESSING", `{}`, 1, secs(-ago-1), nil, secs(-ago), secs(-ago+lease), nil, nil, "")
}

func (b *bundle) failed(eventType string, ago int, lastError string) outbox.MessageID {
	b.t.Helper()
	return b.insert(eventType, "FAILED", `{"n":1}`, 10, secs(-ago-60), nil, nil, nil, nil, secs(-ago), lastError)
}

func (b *bundle) sent(eventType string, ago int) outbox.MessageID {
	b.t.Helper()
	return b.insert(eventType, "SENT", `{}`, 1, secs(-ago-60), nil, nil, nil, secs(-ago), nil, "")
}

func (b *bundle) status(id outbox.MessageID) string {
	b.t.Helper()
	var s string
	if err := b.db.QueryRow("SELECT status FROM outbox_messages WHERE id = ?", int64(id)).Scan(&s); err != nil {
		return "gone"
	}
	return s
}

// ---- reading pages ----

var tagRE = regexp.MustCompile(`<[^>]*>`)

// rowCells returns the text of the cells of the table row whose data-type is eventType, tags
// stripped (the HTML-escaped event type as it appears in the attribute).
func rowCells(t *testing.T, body, eventType string) []string {
	t.Helper()
	start := strings.Index(body, `<tr data-type="`+eventType+`">`)
	if start < 0 {
		t.Fatalf("no row for %q in:\n%s", eventType, body)
	}
	end := strings.Index(body[start:], "</tr>")
	row := body[start : start+end]
	var cells []string
	for _, cell := range strings.Split(row, "<td")[1:] {
		cell = cell[strings.Index(cell, ">")+1:]
		cell = strings.TrimSuffix(strings.TrimSpace(cell), "</td>")
		cells = append(cells, strings.TrimSpace(tagRE.ReplaceAllString(cell, "")))
	}
	return cells
}

func csrfField(c *Console) url.Values { return url.Values{"csrf": {c.csrf}} }
