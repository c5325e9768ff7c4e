package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/examples/events"
	"github.com/outboxgen/outboxgen/runtime/outbox"
	"github.com/outboxgen/outboxgen/runtime/outboxtest"
)

func TestSignup(t *testing.T) {
	// run is the program itself, its two workers included: what it prints is checked too.
	db := outboxtest.Open(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	var out bytes.Buffer
	if err := run(ctx, db, &out); err != nil {
		t.Fatalf("run: %v\noutput:\n%s", err, out.String())
	}
	t.Logf("output:\n%s", out.String())

	// The rolled-back signup left nothing: no company, no message.
	companies := map[int64]string{}
	var names []string
	rows, err := db.Query("SELECT id, name FROM companies ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int64
		var n string
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		companies[id] = n
		names = append(names, n)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(names, ","), "Acme,Initech,Umbrella,Hooli"; got != want {
		t.Errorf("companies = %s, want %s (Globex rolled back)", got, want)
	}

	// One welcome_email per committed company, each for a company that exists.
	var mailed []string
	for _, e := range outboxtest.Enqueued[events.WelcomeEmail](t, db) {
		if companies[e.CompanyID] == "" {
			t.Errorf("welcome_email %+v: no such company", e)
		}
		mailed = append(mailed, companies[e.CompanyID]+"="+e.Email)
	}
	if got, want := strings.Join(mailed, ","), "Acme=ops@acme.example,Initech=bill@initech.example,Umbrella=it@umbrella.example,Hooli=founder@hooli.invalid"; got != want {
		t.Errorf("messages = %s, want %s", got, want)
	}
	// Each SENT, except the bounced address, FAILED after one attempt with the bounce as
	// last_error. Stats counts every message that is not SENT, of any event type.
	s, err := outbox.Stats(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if s.Pending != 0 || s.Processing != 0 || s.Failed != 1 {
		t.Errorf("%d pending, %d processing, %d failed; want only Hooli's mail FAILED, the others SENT", s.Pending, s.Processing, s.Failed)
	}
	failed, err := outbox.ListFailed(ctx, db, outbox.Filter{}, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range failed {
		var e events.WelcomeEmail
		if err := e.DecodeOutboxPayload(f.Payload); err != nil || f.EventType != "welcome_email" || companies[e.CompanyID] != "Hooli" || f.Attempts != 1 || !strings.Contains(f.LastError, "hard bounce") {
			t.Errorf("FAILED %s %s (%v): attempts %d, last_error %q; want only Hooli's mail, after 1 attempt (Permanent), with the bounce", f.EventType, f.Payload, err, f.Attempts, f.LastError)
		}
	}

	// The fake mailer sent each mail exactly once.
	for _, to := range []string{"ops@acme.example", "bill@initech.example", "it@umbrella.example"} {
		if n := strings.Count(out.String(), "mailer: to "+to+":"); n != 1 {
			t.Errorf("mails to %s: %d, want 1", to, n)
		}
	}
	for _, want := range []string{"signup of Globex failed and rolled back", "3 welcome mails sent; 1 FAILED"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
}
