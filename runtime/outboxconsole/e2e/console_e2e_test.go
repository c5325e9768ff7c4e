package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	_ "github.com/go-sql-driver/mysql"

	"github.com/outboxgen/outboxgen/runtime/outbox"
	"github.com/outboxgen/outboxgen/runtime/outboxconsole"
	"github.com/outboxgen/outboxgen/runtime/outboxtest/testdb"
)

// chromiumPath is Debian's chromium (apt-get install chromium), never a downloaded browser.
const chromiumPath = "/usr/bin/chromium"

var updateDocs = flag.Bool("docs", false, "also write the overview's screenshot to docs/console.png")

// artifacts is where the screenshots go: $OUTBOX_E2E_ARTIFACTS, or a folder under the temp dir.
func artifacts(t *testing.T) string {
	dir := os.Getenv("OUTBOX_E2E_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "outboxconsole-e2e")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// browser starts headless Chromium with the flags this machine needs (no sandbox as root, no
// background networking: the network is closed) and a fresh profile.
func browser(t *testing.T) context.Context {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		if os.Getenv("OUTBOX_E2E_REQUIRE") != "" {
			t.Fatalf("%s: %v (scripts-test.sh installs Debian's chromium)", chromiumPath, err)
		}
		t.Skipf("%s is missing: apt-get install -y chromium (scripts-test.sh does)", chromiumPath)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancelCtx := chromedp.NewContext(actx)
	t.Cleanup(cancelCtx)
	if err := chromedp.Do(ctx); err != nil { // starts the browser (without a timeout: it would stop the browser)
		t.Fatalf("start %s: %v", chromiumPath, err)
	}
	return ctx
}

// TestConsoleInChromium is the on-call flow in a real browser: the overview shows the numbers
// outbox.Stats gives; the FAILED message opens whole, its hostile payload shown as text and
// never run; Retry, then Confirm, makes it PENDING; a worker that handles its type then
// delivers it, and the page (refreshing itself) shows SENT.
func TestConsoleInChromium(t *testing.T) {
	db := testdb.Migrated(t)
	ctx := browser(t)
	bg := context.Background()

	// Traffic for the chart: welcome_email arrives faster than its worker delivers for a few
	// seconds (the backlog rises, then drains).
	welcome := outbox.NewRouter()
	welcome.Handle("welcome_email", outbox.Policy{}, func(context.Context, json.RawMessage, outbox.Delivery) error {
		time.Sleep(200 * time.Millisecond)
		return nil
	})
	welcomePolls := startWorker(t, db, welcome, 4)

	// The message the on-call person will retry: failed for good, with HTML in its error and a
	// payload that tries to close the page's script.
	const payload = `{"invoice_id":"inv_2042","amount":{"amount":129900,"currency":"KRW"},"note":"</script><script>alert(1)</script>"}`
	const lastError = "permanent: gateway said <b>402</b> card_declined (insufficient funds)\n" +
		"goroutine 41 [running]:\nbilling.(*Handler).HandlePaymentFailed(...)\n\tbilling/handler.go:88"
	res := db.MustExec(t, `INSERT INTO outbox_messages (event_type, payload, idempotency_key, status, attempts, max_attempts,
		next_attempt_at, claimed_at, reclaim_after, claim_token, last_error, created_at, failed_at)
		VALUES ('payment_failed', ?, 'inv_2042', 'FAILED', 12, 12, TIMESTAMPADD(MINUTE, -9, UTC_TIMESTAMP(6)),
		TIMESTAMPADD(MINUTE, -9, UTC_TIMESTAMP(6)), TIMESTAMPADD(MINUTE, -4, UTC_TIMESTAMP(6)), 'c7f3e2a9',
		?, TIMESTAMPADD(MINUTE, -52, UTC_TIMESTAMP(6)), TIMESTAMPADD(SECOND, -530, UTC_TIMESTAMP(6)))`, payload, lastError)
	failedID, err := res.LastInsertId()
	if err != nil {
		t.Fatal(err)
	}
	// An older failure of another type, and work that nobody claims (no worker handles it).
	db.MustExec(t, `INSERT INTO outbox_messages (event_type, payload, status, attempts, max_attempts, next_attempt_at,
		last_error, created_at, failed_at) VALUES ('invoice_paid', '{"invoice_id":"inv_1977"}', 'FAILED', 10, 10,
		TIMESTAMPADD(HOUR, -3, UTC_TIMESTAMP(6)), 'smtp: 550 5.1.1 mailbox does not exist', TIMESTAMPADD(HOUR, -5, UTC_TIMESTAMP(6)),
		TIMESTAMPADD(HOUR, -3, UTC_TIMESTAMP(6)))`)
	for i := 0; i < 4; i++ {
		enqueue(t, db, "report_ready", fmt.Sprintf(`{"report_id":%d}`, 500+i))
	}

	logs := &lockedLog{}
	c := outboxconsole.New(db.DB, outboxconsole.AllowWrites(), outboxconsole.WithSampleInterval(500*time.Millisecond),
		outboxconsole.WithTitle("app@tcp(db.internal:3306)/billing"),
		outboxconsole.WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
	t.Cleanup(func() { c.Close() })
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)

	// Ten seconds of traffic, a message every 100ms, 4 at a time from the 2nd to the 5th second:
	// 40/s against a worker that delivers 20/s.
	traffic := time.NewTicker(100 * time.Millisecond)
	for tick := 0; tick < 100; tick++ {
		n := 1
		if tick >= 10 && tick < 50 {
			n = 4
		}
		for j := 0; j < n; j++ {
			enqueue(t, db, "welcome_email", fmt.Sprintf(`{"company_id":%d}`, tick*10+j))
		}
		<-traffic.C
	}
	traffic.Stop()
	// Wait until the worker has delivered the bursts: the numbers then hold still. Checked after
	// each claim of the worker.
	var snap outbox.Snapshot
	drainBy := time.After(60 * time.Second)
	for {
		var err error
		if snap, err = outbox.Stats(bg, db); err != nil {
			t.Fatal(err)
		}
		if tc := snap.ByType["welcome_email"]; tc.Pending+tc.Processing == 0 {
			break
		}
		select {
		case <-welcomePolls:
		case <-drainBy:
			t.Fatalf("the welcome_email worker did not deliver the bursts within 60s: %+v", snap.ByType)
		}
	}

	var dialogs atomic.Int32
	if err := chromedp.Listen(ctx, func(ev any) {
		if _, ok := ev.(*page.EventJavascriptDialogOpening); ok {
			dialogs.Add(1)
			go chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error { // dismiss it
				_, err := cdp.Call(ctx, t, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
				return err
			}))
		}
	}); err != nil {
		t.Fatal(err)
	}

	// 1. The overview: the numbers are Stats's. The page refreshes itself until its chart has two
	// samples after the last delivery: nothing delivered between them.
	do(t, ctx, "open the overview", chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#by-type")))
	do(t, ctx, "wait for the chart to show the bursts delivered",
		chromedp.WaitReady(chromedp.Search(`//*[local-name()="title" and contains(., "delivered 0/min")]`)),
		chromedp.WaitVisible(chromedp.CSS("#by-type")))
	var totals [6]string
	for i, id := range []string{"pending", "due", "processing", "stale", "stuck", "failed"} {
		totals[i] = text(t, ctx, "#total-"+id)
	}
	want := [6]string{}
	for i, n := range []int64{snap.Pending, snap.Due, snap.Processing, snap.Stale, snap.Stuck, snap.Failed} {
		want[i] = strconv.FormatInt(n, 10)
	}
	if totals != want || want != [6]string{"4", "4", "0", "0", "0", "2"} {
		t.Errorf("overview totals pending/due/processing/stale/stuck/failed = %v; Stats says %v; the scenario %v",
			totals, want, [6]string{"4", "4", "0", "0", "0", "2"})
	}
	if main := text(t, ctx, "main"); !strings.Contains(main, "1 message(s) FAILED within the last 1h") {
		t.Errorf("the overview lacks the failures alert:\n%s", main)
	}
	shot(t, ctx, "overview.png", *updateDocs)

	// 2. The FAILED list, then the message, whole.
	do(t, ctx, "open the FAILED message",
		chromedp.Click(chromedp.CSS("#total-failed")),
		chromedp.WaitVisible(chromedp.CSS("#failed-list")),
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`#failed-list a[href="message?id=%d"]`, failedID))),
		chromedp.WaitVisible(chromedp.CSS("#payload")))
	status, shownPayload, shownError := text(t, ctx, "#status"), text(t, ctx, "#payload"), text(t, ctx, "#last-error")
	if status != "FAILED" || !strings.Contains(shownPayload, `"note":"</script><script>alert(1)</script>"`) ||
		!strings.Contains(shownError, "gateway said <b>402</b> card_declined") {
		t.Errorf("message page: status %q, payload %q, error %q; want FAILED and the text shown as text", status, shownPayload, shownError)
	}
	shot(t, ctx, "message-failed.png", false)

	// 3. Retry, confirm: PENDING.
	do(t, ctx, "press Retry", chromedp.Click(chromedp.CSS("#retry")), chromedp.WaitVisible(chromedp.CSS("#confirm")))
	if dry := text(t, ctx, "#dry-run"); !strings.Contains(dry, "1 of the 1 given message(s) are FAILED and would move") {
		t.Errorf("the confirmation says %q", dry)
	}
	do(t, ctx, "confirm", chromedp.Click(chromedp.CSS("#confirm")), chromedp.WaitVisible(chromedp.CSS("#status")))
	if status = text(t, ctx, "#status"); status != "PENDING" {
		t.Fatalf("after Confirm the message is %q, want PENDING", status)
	}
	if !strings.Contains(logs.String(), fmt.Sprintf("action=retry ids=[%d] event_type=\"\" count=1", failedID)) {
		t.Errorf("no audit line for the retry:\n%s", logs)
	}

	// 4. A worker that handles payment_failed runs; the page refreshes itself to SENT.
	billing := outbox.NewRouter()
	billing.Handle("payment_failed", outbox.Policy{}, func(context.Context, json.RawMessage, outbox.Delivery) error { return nil })
	startWorker(t, db, billing, 0)
	do(t, ctx, "wait for the message page to refresh itself to SENT",
		chromedp.WaitVisible(chromedp.Search(`//*[@id="status" and normalize-space(.)="SENT"]`)))
	shot(t, ctx, "message-sent.png", false)
	if n := dialogs.Load(); n != 0 {
		t.Errorf("%d JavaScript dialog(s) opened: text from the database ran as script", n)
	}
}

// do runs browser steps, each call bounded by 30s.
func do(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(sctx, steps...); err != nil {
		// Say where the browser was: the page's address and text, and a screenshot.
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		loc, _ := chromedp.Run(lctx, chromedp.Location())
		body, _ := chromedp.Run(lctx, chromedp.Text(chromedp.CSS("body")))
		if png, err := chromedp.Run(lctx, chromedp.FullScreenshot(100)); err == nil {
			_ = os.WriteFile(filepath.Join(artifacts(t), "failure.png"), png, 0o644)
		}
		t.Fatalf("%s: %v\nthe browser is at %s:\n%s", what, err, loc, body)
	}
}

// text is the visible text of the first element matching a CSS selector.
func text(t *testing.T, ctx context.Context, css string) string {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	s, err := chromedp.Run(sctx, chromedp.Text(chromedp.CSS(css)))
	if err != nil {
		t.Fatalf("read %s: %v", css, err)
	}
	return strings.TrimSpace(s)
}

func enqueue(t *testing.T, db *testdb.DB, eventType, payload string) {
	t.Helper()
	if _, err := outbox.Enqueue(context.Background(), db, outbox.Message{EventType: eventType, Payload: json.RawMessage(payload)}, outbox.Standalone()); err != nil {
		t.Fatal(err)
	}
}

// startWorker runs a worker until the test ends. Each claim it makes (each poll) is reported
// on the returned channel, which holds one report and drops the rest until it is read.
func startWorker(t *testing.T, db *testdb.DB, r *outbox.Router, concurrency int) <-chan struct{} {
	t.Helper()
	polls := make(chan struct{}, 1)
	w, err := outbox.NewWorker(db.DB, r, outbox.Config{PollInterval: 200 * time.Millisecond, Concurrency: concurrency,
		Logger:   slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Observer: pollObserver{polls: polls}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("worker: %v", err)
		}
	})
	return polls
}

// pollObserver reports each claim on polls.
type pollObserver struct {
	outbox.NopObserver
	polls chan struct{}
}

func (p pollObserver) Claimed(int, time.Duration) {
	select {
	case p.polls <- struct{}{}:
	default:
	}
}

// shot saves a full-page screenshot as a test artifact (and, with -docs, as docs/console.png).
func shot(t *testing.T, ctx context.Context, name string, docs bool) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(artifacts(t), name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
	if docs {
		if err := os.WriteFile(filepath.Join("..", "..", "..", "docs", "console.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// lockedLog collects the console's log lines.
type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
