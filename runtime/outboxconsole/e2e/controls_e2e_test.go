package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/outboxgen/outboxgen/runtime/outbox"
	"github.com/outboxgen/outboxgen/runtime/outboxconsole"
	"github.com/outboxgen/outboxgen/runtime/outboxtest/testdb"
)

// TestConsoleControlsInChromium is the outage flow in a real browser: Pause on a type's row
// (with a hostile reason) shows the banner, and the worker stops claiming the type; Cancel on a
// PENDING message's page shows the dry run, then cancels it; Resume in the banner lets the
// worker deliver the rest; Run now on a backed-off message's page makes it due, and the worker
// delivers it.
func TestConsoleControlsInChromium(t *testing.T) {
	db := testdb.Migrated(t)
	ctx := browser(t)
	bg := context.Background()

	var delivered atomic.Int32
	r := outbox.NewRouter()
	r.Handle("invoice_mail", outbox.Policy{}, func(context.Context, json.RawMessage, outbox.Delivery) error {
		delivered.Add(1)
		return nil
	})
	w, polls := startPollingWorker(t, db, r)

	// The backed-off message Run now will move: two attempts failed, the next in an hour.
	res := db.MustExec(t, `INSERT INTO outbox_messages (event_type, payload, status, attempts, max_attempts, next_attempt_at,
		last_error, created_at) VALUES ('invoice_mail', '{"invoice_id":"inv_3001"}', 'PENDING', 2, 10,
		TIMESTAMPADD(HOUR, 1, UTC_TIMESTAMP(6)), 'smtp: 421 4.7.0 try again later', TIMESTAMPADD(MINUTE, -6, UTC_TIMESTAMP(6)))`)
	backedOff, err := res.LastInsertId()
	if err != nil {
		t.Fatal(err)
	}
	// Beside it, for the picture: a FAILED message and work nobody claims.
	db.MustExec(t, `INSERT INTO outbox_messages (event_type, payload, status, attempts, max_attempts, next_attempt_at,
		last_error, created_at, failed_at) VALUES ('payment_failed', '{"invoice_id":"inv_1977"}', 'FAILED', 10, 10,
		TIMESTAMPADD(HOUR, -3, UTC_TIMESTAMP(6)), 'gateway: 402 card_declined', TIMESTAMPADD(HOUR, -5, UTC_TIMESTAMP(6)),
		TIMESTAMPADD(HOUR, -3, UTC_TIMESTAMP(6)))`)
	for i := 0; i < 3; i++ {
		enqueue(t, db, "report_ready", fmt.Sprintf(`{"report_id":%d}`, 700+i))
	}

	logs := &lockedLog{}
	c := outboxconsole.New(db.DB, outboxconsole.AllowWrites(), outboxconsole.WithSampleInterval(time.Second),
		outboxconsole.WithTitle("app@tcp(db.internal:3306)/billing"),
		outboxconsole.WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
	t.Cleanup(func() { c.Close() })
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)

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

	// 1. Pause invoice_mail from its row, with a reason that tries to be markup.
	const reason = `mail provider down <img src=x onerror=alert(1)>`
	row := `#by-type tr[data-type="invoice_mail"] `
	do(t, ctx, "open the pause form on invoice_mail's row",
		chromedp.Navigate(srv.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS(row+"details.pause summary")),
		chromedp.Click(chromedp.CSS(row+"details.pause summary")),
		chromedp.WaitVisible(chromedp.CSS(row+`input[name="reason"]`)),
		chromedp.SendKeys(chromedp.CSS(row+`input[name="reason"]`), reason),
		chromedp.SendKeys(chromedp.CSS(row+`input[name="for"]`), "15m"))
	do(t, ctx, "press Pause",
		chromedp.Click(chromedp.CSS(row+".pause-button")),
		chromedp.WaitVisible(chromedp.CSS(`.alert.paused[data-paused="invoice_mail"]`)))
	banner := text(t, ctx, `.alert.paused[data-paused="invoice_mail"]`)
	if !strings.Contains(banner, "invoice_mail") || !strings.Contains(banner, reason) || !strings.Contains(banner, "ends in 1") {
		t.Errorf("the banner says %q; want the type, the reason as text and an end in about 15m", banner)
	}
	ps, err := outbox.Pauses(bg, db)
	if err != nil || len(ps) != 1 || ps[0].EventType != "invoice_mail" || ps[0].Reason != reason || ps[0].Until.IsZero() {
		t.Fatalf("after Pause the database holds %+v (%v); want invoice_mail paused for 15m with the reason", ps, err)
	}

	// 2. The worker stops claiming it: once it has read the pause, new messages stay PENDING
	// over its next claims.
	waitFor(t, polls, 10*time.Second, "the worker to read the pause", func() bool {
		return slices.Contains(w.PausedTypes(), "invoice_mail")
	})
	var held []int64
	for i := 0; i < 3; i++ {
		id, err := outbox.Enqueue(bg, db, outbox.Message{EventType: "invoice_mail", Payload: json.RawMessage(fmt.Sprintf(`{"invoice_id":"inv_31%02d"}`, i))}, outbox.Standalone())
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, int64(id))
	}
	claims := 0
	waitFor(t, polls, 10*time.Second, "five claims of the worker", func() bool { claims++; return claims > 5 })
	var unclaimed int
	if err := db.QueryRow(`SELECT COUNT(*) FROM outbox_messages WHERE event_type = 'invoice_mail' AND status = 'PENDING'
		AND attempts = 0 AND claimed_at IS NULL`).Scan(&unclaimed); err != nil {
		t.Fatal(err)
	}
	if unclaimed != 3 || delivered.Load() != 0 {
		t.Fatalf("paused: %d of the 3 new invoice_mail messages unclaimed, %d delivered; want 3 and 0", unclaimed, delivered.Load())
	}
	do(t, ctx, "reload the overview", chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS(row+"button.resume")))
	shotDocs(t, ctx, "controls.png", "console-controls.png")

	// 3. Cancel one of them from its page: the dry run first, then Confirm.
	cancelID := held[0]
	do(t, ctx, "press Cancel on a PENDING message",
		chromedp.Navigate(fmt.Sprintf("%s/message?id=%d", srv.URL, cancelID)),
		chromedp.WaitVisible(chromedp.CSS("#cancel")),
		chromedp.Click(chromedp.CSS("#cancel")),
		chromedp.WaitVisible(chromedp.CSS("#confirm")))
	if dry := text(t, ctx, "#dry-run"); !strings.Contains(dry, "1 of the 1 given message(s) are PENDING or running and would be cancelled") {
		t.Errorf("the cancel's dry run says %q", dry)
	}
	if s := status(t, db, cancelID); s != "PENDING" {
		t.Fatalf("the dry run made the message %s", s)
	}
	do(t, ctx, "confirm the cancel", chromedp.Click(chromedp.CSS("#confirm")),
		chromedp.WaitVisible(chromedp.Search(`//*[@id="status" and normalize-space(.)="CANCELLED"]`)))
	if s := status(t, db, cancelID); s != "CANCELLED" {
		t.Fatalf("after Confirm the message is %s, want CANCELLED", s)
	}

	// 4. Resume from the banner: the worker delivers the other two, never the cancelled one.
	do(t, ctx, "press Resume in the banner",
		chromedp.Navigate(srv.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS(`.alert.paused[data-paused="invoice_mail"] button.resume`)),
		chromedp.Click(chromedp.CSS(`.alert.paused[data-paused="invoice_mail"] button.resume`)),
		chromedp.WaitVisible(chromedp.CSS("#notice")))
	if n := text(t, ctx, "#notice"); !strings.Contains(n, "Resumed invoice_mail") {
		t.Errorf("after Resume the notice says %q", n)
	}
	if ps, err := outbox.Pauses(bg, db); err != nil || len(ps) != 0 {
		t.Fatalf("after Resume the database holds pauses %+v (%v)", ps, err)
	}
	waitFor(t, polls, 30*time.Second, "the worker to deliver the two messages left", func() bool {
		return status(t, db, held[1]) == "SENT" && status(t, db, held[2]) == "SENT"
	})
	if s := status(t, db, cancelID); s != "CANCELLED" {
		t.Errorf("after Resume the cancelled message is %s", s)
	}

	// 5. Run now on the backed-off message: the dry run, Confirm, then the page (refreshing
	// itself) shows the worker deliver it.
	do(t, ctx, "press Run now on the backed-off message",
		chromedp.Navigate(fmt.Sprintf("%s/message?id=%d", srv.URL, backedOff)),
		chromedp.WaitVisible(chromedp.CSS("#runnow")),
		chromedp.Click(chromedp.CSS("#runnow")),
		chromedp.WaitVisible(chromedp.CSS("#confirm")))
	if dry := text(t, ctx, "#dry-run"); !strings.Contains(dry, "1 of the 1 given message(s) are PENDING and wait") {
		t.Errorf("the run now's dry run says %q", dry)
	}
	do(t, ctx, "confirm the run now, and wait for the page to show SENT", chromedp.Click(chromedp.CSS("#confirm")),
		chromedp.WaitVisible(chromedp.Search(`//*[@id="status" and normalize-space(.)="SENT"]`)))
	var attempts int
	if err := db.QueryRow("SELECT attempts FROM outbox_messages WHERE id = ?", backedOff).Scan(&attempts); err != nil || attempts != 3 {
		t.Errorf("the run-now message has %d attempts (%v), want 3: its 2 failed ones and the delivery", attempts, err)
	}
	for _, action := range []string{"action=pause", "action=cancel", "action=resume", "action=runnow"} {
		if !strings.Contains(logs.String(), action) {
			t.Errorf("no audit line with %s:\n%s", action, logs)
		}
	}
	if n := dialogs.Load(); n != 0 {
		t.Errorf("%d JavaScript dialog(s) opened: the pause's reason ran as script", n)
	}
}

// startPollingWorker runs a worker until the test ends, and reports each of its claims on the
// returned channel (one report held, the rest dropped until it is read).
func startPollingWorker(t *testing.T, db *testdb.DB, r *outbox.Router) (*outbox.Worker, <-chan struct{}) {
	t.Helper()
	polls := make(chan struct{}, 1)
	w, err := outbox.NewWorker(db.DB, r, outbox.Config{PollInterval: 200 * time.Millisecond,
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
	return w, polls
}

// waitFor checks cond after each claim of the worker until it holds, or fails the test after
// limit.
func waitFor(t *testing.T, polls <-chan struct{}, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(limit)
	for !cond() {
		select {
		case <-polls:
		case <-deadline:
			t.Fatalf("waited %s for %s", limit, what)
		}
	}
}

func status(t *testing.T, db *testdb.DB, id int64) string {
	t.Helper()
	var s string
	if err := db.QueryRow("SELECT status FROM outbox_messages WHERE id = ?", id).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// shotDocs saves a screenshot of the viewport as a test artifact and, with -docs, as
// docs/<docsName>.
func shotDocs(t *testing.T, ctx context.Context, name, docsName string) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(sctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(artifacts(t), name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
	if *updateDocs {
		if err := os.WriteFile(filepath.Join("..", "..", "..", "docs", docsName), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
