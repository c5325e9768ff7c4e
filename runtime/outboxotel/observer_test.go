package outboxotel_test

import (
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/outboxgen/outboxgen/runtime/outbox"
	"github.com/outboxgen/outboxgen/runtime/outboxotel"
)

// The observer's mapping from events to instruments, fed by hand; the worker-driven test is
// in worker_test.go.
func TestObserverMapsEvents(t *testing.T) {
	t.Parallel()
	m := newMetrics(t)
	obs, err := outboxotel.NewObserver(outboxotel.WithMeterProvider(m.mp))
	if err != nil {
		t.Fatal(err)
	}
	obs.Claimed(3, 2*time.Millisecond)
	obs.Claimed(0, time.Millisecond) // an empty claim still has a duration
	obs.Claimed(-1, time.Millisecond)
	obs.Handled("a", outbox.OutcomeSent, 10*time.Millisecond)
	obs.Handled("a", outbox.OutcomeSent, 20*time.Millisecond)
	obs.Handled("a", outbox.OutcomeRetried, 30*time.Millisecond)
	obs.Handled("b", outbox.OutcomeFailed, 40*time.Millisecond)
	obs.Reclaimed(2)
	obs.Reclaimed(0)
	obs.Stuck(4)
	obs.Stuck(-1)
	obs.HandedOff(5) // InTx's handoffs: consumed, without a claim duration
	obs.HandedOff(0)

	got := m.mustCollect(t)
	claim := map[string]string{"messaging.system": "outboxgen", "messaging.operation.name": "claim", "messaging.operation.type": "receive"}
	for _, c := range []struct {
		name  string
		attrs map[string]string
		want  float64
	}{
		{"messaging.client.consumed.messages", claim, 3},
		{"messaging.client.consumed.messages", map[string]string{"messaging.system": "outboxgen", "messaging.operation.name": "handoff", "messaging.operation.type": "receive"}, 5},
		{"outboxgen.handled.messages", map[string]string{"messaging.destination.name": "a", "outboxgen.outcome": "sent"}, 2},
		{"outboxgen.handled.messages", map[string]string{"messaging.destination.name": "a", "outboxgen.outcome": "retried", "error.type": "_OTHER"}, 1},
		{"outboxgen.handled.messages", map[string]string{"messaging.destination.name": "b", "outboxgen.outcome": "failed", "error.type": "_OTHER"}, 1},
		{"outboxgen.reclaimed.messages", nil, 2},
		{"outboxgen.stuck_seen.messages", nil, 4},
	} {
		if v, _ := point(got[c.name], c.attrs); v != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.attrs, v, c.want)
		}
	}
	if sum, ok := got["outboxgen.handled.messages"].Data.(metricdata.Sum[int64]); !ok || !sum.IsMonotonic || len(sum.DataPoints) != 3 {
		t.Errorf("outboxgen.handled.messages = %+v, want a monotonic sum of 3 series", got["outboxgen.handled.messages"].Data)
	}
	if _, ok := point(got["outboxgen.handled.messages"], map[string]string{"outboxgen.outcome": "sent", "error.type": "_OTHER"}); ok != 0 {
		t.Error("error.type set on sent messages")
	}
	if n := histCount(got["messaging.client.operation.duration"], claim); n != 3 {
		t.Errorf("claim duration observations = %d, want 3 (empty claims included)", n)
	}
	if n := histCount(got["messaging.process.duration"], map[string]string{"messaging.destination.name": "a", "outboxgen.outcome": "sent", "messaging.operation.name": "process", "messaging.system": "outboxgen"}); n != 2 {
		t.Errorf("a/sent process duration observations = %d, want 2", n)
	}
	if h := got["messaging.process.duration"].Data.(metricdata.Histogram[float64]); len(h.DataPoints) != 3 || h.DataPoints[0].Bounds[len(h.DataPoints[0].Bounds)-1] != 60 {
		t.Errorf("process duration = %d series, bounds %v; want 3 series with outboxprom's buckets up to 60s", len(h.DataPoints), h.DataPoints[0].Bounds)
	}
	for name, unit := range map[string]string{
		"messaging.client.consumed.messages": "{message}", "messaging.client.operation.duration": "s",
		"messaging.process.duration": "s", "outboxgen.handled.messages": "{message}",
		"outboxgen.reclaimed.messages": "{message}", "outboxgen.stuck_seen.messages": "{message}",
	} {
		if got[name].Unit != unit || got[name].Description == "" {
			t.Errorf("%s: unit %q description %q, want unit %q and a description", name, got[name].Unit, got[name].Description, unit)
		}
	}
}

// countingObserver counts Handled and HandedOff calls.
type countingObserver struct {
	outbox.NopObserver
	handled, handedOff int
}

func (c *countingObserver) Handled(string, outbox.Outcome, time.Duration) { c.handled++ }
func (c *countingObserver) HandedOff(n int)                               { c.handedOff += n }

// Instrument keeps the Observer and Middleware a Config already had.
func TestInstrumentKeepsWhatConfigHad(t *testing.T) {
	t.Parallel()
	m := newMetrics(t)
	prom := &countingObserver{}
	var order []string
	mine := func(next outbox.HandlerFunc) outbox.HandlerFunc { order = append(order, "mine"); return next }
	cfg, err := outboxotel.Instrument(outbox.Config{Observer: prom, Middleware: []outbox.Middleware{mine}},
		outboxotel.WithMeterProvider(m.mp), outboxotel.WithTracerProvider(newTracing(t).tp))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Observer.Handled("a", outbox.OutcomeSent, time.Millisecond)
	if prom.handled != 1 {
		t.Errorf("the Config's own observer saw %d events, want 1", prom.handled)
	}
	// The combined Observer passes handoffs on to the members that take them.
	h, ok := cfg.Observer.(outbox.HandoffObserver)
	if !ok {
		t.Fatal("Instrument's combined Observer does not implement outbox.HandoffObserver")
	}
	h.HandedOff(2)
	if prom.handedOff != 2 {
		t.Errorf("the Config's own observer heard of %d handoffs, want 2", prom.handedOff)
	}
	if v, _ := point(m.mustCollect(t)["messaging.client.consumed.messages"], map[string]string{"messaging.operation.name": "handoff"}); v != 2 {
		t.Errorf("messaging.client.consumed.messages{handoff} = %v, want 2", v)
	}
	if v, _ := point(m.mustCollect(t)["outboxgen.handled.messages"], nil); v != 1 {
		t.Errorf("outboxgen.handled.messages = %v, want 1", v)
	}
	if len(cfg.Middleware) != 2 {
		t.Fatalf("%d middleware, want outboxotel's and the Config's", len(cfg.Middleware))
	}
	cfg.Middleware[1](nil)
	if len(order) != 1 {
		t.Error("the Config's middleware is not second")
	}
}

// An outcome the runtime adds later gets a series of its own, and so does every event type,
// past the number of event types whose attribute sets are cached.
func TestObserverOtherOutcomesAndManyTypes(t *testing.T) {
	t.Parallel()
	m := newMetrics(t)
	obs, err := outboxotel.NewObserver(outboxotel.WithMeterProvider(m.mp))
	if err != nil {
		t.Fatal(err)
	}
	obs.Handled("a", outbox.Outcome("skipped"), time.Millisecond)
	obs.Handled("a", outbox.Outcome("skipped"), time.Millisecond)
	const types = 1100
	for i := range types {
		obs.Handled(fmt.Sprint("t", i), outbox.OutcomeSent, time.Millisecond)
		obs.Handled(fmt.Sprint("t", i), outbox.OutcomeRetried, time.Millisecond)
	}
	got := m.mustCollect(t)
	if v, _ := point(got["outboxgen.handled.messages"], map[string]string{"messaging.destination.name": "a", "outboxgen.outcome": "skipped", "error.type": "_OTHER"}); v != 2 {
		t.Errorf("a/skipped = %v, want 2", v)
	}
	for _, name := range []string{"t0", "t1099"} {
		if v, _ := point(got["outboxgen.handled.messages"], map[string]string{"messaging.destination.name": name, "outboxgen.outcome": "retried", "error.type": "_OTHER"}); v != 1 {
			t.Errorf("%s/retried = %v, want 1", name, v)
		}
	}
	if sum := got["outboxgen.handled.messages"].Data.(metricdata.Sum[int64]); len(sum.DataPoints) != 1+2*types {
		t.Errorf("%d series, want %d", len(sum.DataPoints), 1+2*types)
	}
}
