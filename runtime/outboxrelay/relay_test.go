package outboxrelay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// The relay modules' tests (runtime/outboxnats, runtime/outboxkafka) run all of this against
// their servers; these need neither a server nor a database.

func TestMetadata(t *testing.T) {
	d := outbox.Delivery{
		MessageID: 7, EventType: "welcome_email", IdempotencyKey: "welcome_email:2:42", Attempt: 3,
		EnqueuedAt: time.Date(2025, 3, 4, 5, 6, 7, 891011000, time.FixedZone("CET", 3600)),
	}
	str := func(hs []Header) string {
		var b strings.Builder
		for _, h := range hs {
			fmt.Fprintf(&b, "%s=%s;", h.Key, h.Value)
		}
		return b.String()
	}
	base := "outbox-message-id=7;outbox-event-type=welcome_email;outbox-idempotency-key=welcome_email:2:42;outbox-attempt=3;outbox-enqueued-at=2025-03-04T04:06:07.891011Z;"
	if got := str(Metadata("outbox-", "", d)); got != base {
		t.Errorf("Metadata = %s, want %s", got, base)
	}
	d.OrderingKey = "users:42"
	if got, want := str(Metadata("outbox-", "shard-a", d)), base+"outbox-ordering-key=users:42;outbox-source=shard-a;"; got != want {
		t.Errorf("with an ordering key and a source, Metadata = %s, want %s", got, want)
	}
	if got := Metadata("", "shard-a", d); got != nil {
		t.Errorf("with no prefix, Metadata = %v, want none", got)
	}
}

func TestCheckSource(t *testing.T) {
	for name, ok := range map[string]bool{"": true, "shard-a": true, "eu.west:1_b": true, strings.Repeat("x", 64): true,
		"shard a": false, "shard/a": false, strings.Repeat("x", 65): false, "é": false} {
		err := CheckSource("relaytest", name)
		if (err == nil) != ok || err != nil && !strings.HasPrefix(err.Error(), "relaytest: WithSource(") {
			t.Errorf("CheckSource(%q) = %v, want ok %v", name, err, ok)
		}
	}
}

func TestDestinationsMapOnce(t *testing.T) {
	calls := 0
	ds := NewDestinations("relaytest", "subject", func(et string) string { calls++; return "x." + et }, func(n string) error {
		if strings.Contains(n, " ") {
			return errors.New("a space")
		}
		return nil
	})
	for range 3 {
		if got, err := ds.Get("a"); got != "x.a" || err != nil {
			t.Fatalf("Get(a) = %q, %v", got, err)
		}
		if _, err := ds.Get("b c"); err == nil || err.Error() != `relaytest: event "b c" maps to subject "x.b c": a space` {
			t.Fatalf("Get(b c) = %v", err)
		}
	}
	if calls != 2 {
		t.Errorf("the mapping was called %d times for 2 event types, want 2", calls)
	}
}

func TestRegister(t *testing.T) {
	nop := func(context.Context, json.RawMessage, outbox.Delivery) error { return nil }
	fast := outbox.Policy{Timeout: time.Second}
	dest := func(et string) (string, error) {
		if et == "bad" {
			return "", errors.New("relaytest: bad destination")
		}
		return et, nil
	}
	r := outbox.NewRouter()
	if err := Register("relaytest", r, Types(fast, "a", "b"), dest, nop); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(r.EventTypes(), ","); got != "a,b" {
		t.Errorf("routes %s, want a,b", got)
	}
	if got, _ := r.Policy("b"); got != fast.WithDefaults() {
		t.Errorf("policy of b %+v, want %+v", got, fast.WithDefaults())
	}
	for _, c := range []struct {
		events Events
		want   string
	}{
		{Types(fast), "relaytest: Register: no event types to relay"},
		{Types(fast, "c", ""), "relaytest: Register: empty event type"},
		{Types(fast, "c", "a"), `relaytest: Register: event "a" already has a handler`},
		{Types(fast, "c", "c"), `relaytest: Register: event "c" already has a handler`},
		{Types(fast, "c", "bad"), "relaytest: bad destination"},
		{noPolicy{}, `relaytest: Register: event "c" has no policy`},
	} {
		if err := Register("relaytest", r, c.events, dest, nop); err == nil || err.Error() != c.want {
			t.Errorf("Register(%v) = %v, want %s", c.events.EventTypes(), err, c.want)
		}
	}
	if got := strings.Join(r.EventTypes(), ","); got != "a,b" {
		t.Errorf("after the refusals, routes %s, want a,b", got)
	}
}

type noPolicy struct{}

func (noPolicy) EventTypes() []string                { return []string{"c"} }
func (noPolicy) Policy(string) (outbox.Policy, bool) { return outbox.Policy{}, false }
