package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// No database is needed: the point is that the alert does not depend on one.
func TestAlertIsSentWithADeadDatabase(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	var out bytes.Buffer
	if err := run(ctx, deadDSN, &out); err != nil {
		t.Fatalf("run: %v\noutput:\n%s", err, out.String())
	}
	t.Logf("output:\n%s", out.String())

	got := out.String()
	if !strings.Contains(got, "recording the payment failed") {
		t.Fatalf("the write to the dead DSN did not fail; output:\n%s", got)
	}
	if n := strings.Count(got, "PAGE on-call: mark invoice inv-2026-0042 paid"); n != 1 {
		t.Errorf("pages = %d, want exactly 1", n)
	}
	// The detail carries the database error, so on-call knows what broke.
	if !strings.Contains(got, "connection refused") {
		t.Errorf("the page does not carry the connection error; output:\n%s", got)
	}
	if !strings.Contains(got, "alert delivered after 2 attempt(s)") {
		t.Errorf("want the flaky pager's first failure retried (2 attempts); output:\n%s", got)
	}
}
