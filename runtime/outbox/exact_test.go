package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/internal/testutil"
)

// What goes in comes out byte for byte, on every server: MySQL's JSON column reordered keys,
// respaced, and rewrote 1234.50 as 1234.5 and a 30-digit decimal as a double.
func TestPayloadBytesRoundTripExactly(t *testing.T) {
	t.Parallel()
	d := migrated(t)
	ctx := context.Background()
	payloads := map[string]string{
		"key order and spacing": `{ "z" : 1,"a":2 ,  "m" :{"y":true,"b":null} }`,
		"trailing zero":         `{"raw":1234.50}`,
		"exponent":              `{"e":1e2,"E":-0.0E-0}`,
		"30-digit decimal":      `{"amount":123456789012345678901234567890.123456789}`,
		"big integer":           `{"id":18446744073709551616}`,
		"escapes":               `{"s":"\u00e9\u0000\n\t\"\\\/ \ud83d\ude00","t":"é 日本 😀"}`,
		"duplicate keys":        `{"a":1,"a":2}`,
		"not an object":         `[1, "two",   3.000]`,
		"scalar":                `  "just a string"  `,
	}
	atLimit := `{"pad":"` + strings.Repeat("x", MaxPayloadBytes-len(`{"pad":""}`)) + `"}`
	payloads["at the size limit"] = atLimit

	ids := map[string]MessageID{}
	for name, p := range payloads {
		id, err := Enqueue(ctx, d, Message{EventType: "exact", Payload: json.RawMessage(p)}, Standalone())
		if err != nil {
			t.Fatalf("%s: Enqueue: %v", name, err)
		}
		ids[name] = id
	}
	for name, id := range ids {
		if got := getRow(t, d, id).Payload; got != payloads[name] {
			t.Errorf("%s: stored %d bytes %.80q, want %d bytes %.80q", name, len(got), got, len(payloads[name]), payloads[name])
		}
	}

	// And the handler gets the same bytes.
	var mu sync.Mutex
	got := map[MessageID]string{}
	r := NewRouter()
	r.Handle("exact", Policy{}, func(_ context.Context, p json.RawMessage, dl Delivery) error {
		mu.Lock()
		defer mu.Unlock()
		got[dl.MessageID] = string(p)
		return nil
	})
	stop := start(t, newTestWorker(t, d.DB, r, fastConfig(Config{})))
	testutil.Eventually(t, 20*time.Second, "every payload delivered", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == len(ids)
	})
	stop()
	for name, id := range ids {
		if got[id] != payloads[name] {
			t.Errorf("%s: handler got %d bytes %.80q, want %.80q", name, len(got[id]), got[id], payloads[name])
		}
	}
}

func TestEnqueueRefusesWhatCannotComeBackExactly(t *testing.T) {
	t.Parallel()
	d := migrated(t)
	ctx := context.Background()
	over := `{"pad":"` + strings.Repeat("x", MaxPayloadBytes-len(`{"pad":""}`)+1) + `"}`
	cases := []struct {
		name string
		m    Message
		want string
	}{
		{"over the size limit", Message{EventType: "big_one", Payload: json.RawMessage(over)},
			`outbox: Enqueue "big_one": payload is 4194305 bytes, over the limit of 4194304 (outbox.MaxPayloadBytes)`},
		{"invalid UTF-8", Message{EventType: "latin1", Payload: json.RawMessage("{\"s\":\"caf\xe9\"}")},
			`outbox: Enqueue "latin1": payload is not valid UTF-8 (JSON text must be)`},
		{"invalid JSON", Message{EventType: "broken", Payload: json.RawMessage(`{"a":`)},
			`outbox: Enqueue "broken": payload is not valid JSON`},
		{"key with invalid UTF-8", Message{EventType: "k", Payload: json.RawMessage(`{}`), IdempotencyKey: "in_\xff"},
			`outbox: Enqueue "k": IdempotencyKey must be valid UTF-8 of at most 191 bytes (got 4 bytes)`},
	}
	for _, c := range cases {
		_, err := Enqueue(ctx, d, c.m, Standalone())
		if err == nil || err.Error() != c.want {
			t.Errorf("%s: err = %v, want %q", c.name, err, c.want)
		}
	}
	if n := countRows(t, d, "1=1"); n != 0 {
		t.Errorf("%d rows written by refused enqueues, want 0", n)
	}
}

// Keys that collations fold together are different keys: Once must not skip the second
// invoice's effect. The default collations of MySQL and MariaDB are case- and accent-blind,
// and MariaDB's are PAD SPACE.
func TestOnceKeysCompareAsBytes(t *testing.T) {
	t.Parallel()
	d := migrated(t)
	ctx := context.Background()
	pairs := [][2]string{
		{"invoice:in_1Ab", "invoice:in_1aB"},
		{"café", "cafe"},
		{"a", "a "},
		{"ｆｕｌｌ１", "full1"}, // full-width forms
		{"straße", "strasse"},
		{"\u00c5", "A\u030a"}, // precomposed and combining ring: different bytes
	}
	for _, p := range pairs {
		for i, key := range p {
			first, err := Once(ctx, d, "billing", key)
			if err != nil || !first {
				t.Errorf("Once(billing, %q) after %q: first = %v, %v; want true", key, p[:i], first, err)
			}
		}
		again, err := Once(ctx, d, "billing", p[0])
		if err != nil || again {
			t.Errorf("Once(billing, %q) a second time: first = %v, %v; want false", p[0], again, err)
		}
	}
	// The consumer compares as bytes too.
	if first, err := Once(ctx, d, "Billing", "invoice:in_1Ab"); err != nil || !first {
		t.Errorf("Once(Billing, ...) after Once(billing, ...): first = %v, %v; want true", first, err)
	}
}

// clientFoundRows=true makes an ON DUPLICATE KEY UPDATE that changed nothing report 1 row:
// Once must still say false on a redelivery.
func TestOnceWithClientFoundRows(t *testing.T) {
	t.Parallel()
	d := migrated(t)
	ctx := context.Background()
	db, err := sql.Open("mysql", d.DSN+"&clientFoundRows=true")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i, want := range []bool{true, false, false} {
		err := InTx(ctx, db, func(tx *sql.Tx) error {
			first, err := Once(ctx, tx, "mailer", "welcome_email:1:42")
			if err != nil {
				return err
			}
			if first != want {
				t.Errorf("delivery %d: first = %v, want %v", i+1, first, want)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("delivery %d: %v", i+1, err)
		}
	}
}

// A duplicate inside the handler's transaction leaves that transaction usable: the handler
// commits its other writes after Once said false.
func TestOnceDuplicateKeepsTransaction(t *testing.T) {
	t.Parallel()
	d := migrated(t)
	ctx := context.Background()
	if _, err := Once(ctx, d, "c", "k"); err != nil {
		t.Fatal(err)
	}
	err := InTx(ctx, d.DB, func(tx *sql.Tx) error {
		first, err := Once(ctx, tx, "c", "k")
		if err != nil || first {
			return errors.Join(err, errors.New("want first = false"))
		}
		_, err = Once(ctx, tx, "c", "k2")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if first, err := Once(ctx, d, "c", "k2"); err != nil || first {
		t.Errorf("k2 recorded in the transaction that also met a duplicate: first = %v, %v; want false (committed)", first, err)
	}
}

// Enqueue's strings go as hex literals (binary strings): whatever charset the application's
// connection uses, the payload, key and headers are stored as the UTF-8 that was enqueued.
func TestEnqueueExactWithLatin1Connection(t *testing.T) {
	t.Parallel()
	d := migrated(t)
	ctx := context.Background()
	sep := "?"
	if strings.Contains(d.DSN, "?") {
		sep = "&"
	}
	for _, params := range []string{"charset=latin1", "charset=latin1&interpolateParams=true"} {
		db, err := sql.Open("mysql", d.DSN+sep+params)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		payload := json.RawMessage(`{"name":"Zoë Ünal 東京 😀","note":"naïve café"}`)
		m := Message{EventType: "latin1.conn", Payload: payload, IdempotencyKey: "ключ:😀"}
		var id MessageID
		err = InTx(ctx, db, func(tx *sql.Tx) error {
			id, err = Enqueue(ctx, tx, m, Header("x-name", "Zoë 😀"))
			return err
		})
		if err != nil {
			t.Fatalf("%s: %v", params, err)
		}
		var gotPayload, gotKey, gotHeaders string
		if err := d.QueryRow("SELECT payload, idempotency_key, headers FROM outbox_messages WHERE id = ?", id).Scan(&gotPayload, &gotKey, &gotHeaders); err != nil {
			t.Fatal(err)
		}
		if gotPayload != string(payload) || gotKey != m.IdempotencyKey || !strings.Contains(gotHeaders, "Zoë 😀") {
			t.Errorf("%s: stored payload %q key %q headers %q; want the bytes enqueued", params, gotPayload, gotKey, gotHeaders)
		}
	}
}
