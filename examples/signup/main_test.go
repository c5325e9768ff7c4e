package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/internal/testdb"
)

func TestSignup(t *testing.T) {
	d := testdb.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	var out bytes.Buffer
	if err := run(ctx, d.DB, &out); err != nil {
		t.Fatalf("run: %v\noutput:\n%s", err, out.String())
	}
	t.Logf("output:\n%s", out.String())

	// The rolled-back signup left nothing: no company, no message.
	var companies []string
	rows, err := d.Query("SELECT name FROM companies ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		companies = append(companies, n)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(companies, ","), "Acme,Initech,Umbrella,Hooli"; got != want {
		t.Errorf("companies = %s, want %s (Globex rolled back)", got, want)
	}

	// One welcome_email per committed company, each for a company that exists: SENT, except the
	// bounced address, FAILED after one attempt with the bounce as last_error.
	rows, err = d.Query(`SELECT m.event_type, m.status, m.attempts, COALESCE(m.last_error, ''), m.payload, c.name
		FROM outbox_messages m LEFT JOIN companies c ON c.id = JSON_VALUE(m.payload, '$.company_id')
		ORDER BY m.id`)
	if err != nil {
		t.Fatal(err)
	}
	var mailed []string
	for rows.Next() {
		var typ, status, lastErr, company string
		var attempts int
		var payload []byte
		var name *string
		if err := rows.Scan(&typ, &status, &attempts, &lastErr, &payload, &name); err != nil {
			t.Fatal(err)
		}
		if name != nil {
			company = *name
		}
		var p struct {
			Email string `json:"email"`
		}
		if err := json.Unmarshal(payload, &p); err != nil {
			t.Fatalf("payload %s: %v", payload, err)
		}
		want := "SENT"
		if company == "Hooli" {
			want = "FAILED"
			if attempts != 1 || !strings.Contains(lastErr, "hard bounce") {
				t.Errorf("Hooli's mail: attempts %d, last_error %q; want 1 attempt (Permanent) and the bounce", attempts, lastErr)
			}
		}
		if typ != "welcome_email" || status != want || company == "" {
			t.Errorf("message %s %s for company %q (%s): want welcome_email %s for an existing company", typ, status, company, payload, want)
		}
		mailed = append(mailed, company+"="+p.Email)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(mailed, ","), "Acme=ops@acme.example,Initech=bill@initech.example,Umbrella=it@umbrella.example,Hooli=founder@hooli.invalid"; got != want {
		t.Errorf("messages = %s, want %s", got, want)
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
