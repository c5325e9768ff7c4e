package outboxotel

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// One warning line per minute at most; the next says how many were held back.
func TestWarnerRateLimit(t *testing.T) {
	var buf bytes.Buffer
	w := &warner{log: slog.New(slog.NewTextHandler(&buf, nil))}
	w.warn("outboxotel trace header dropped", "a", "x-1", "first")
	w.warn("outboxotel trace header dropped", "a", "x-2", "second")
	w.warn("outboxotel trace header dropped", "a", "x-3", "third")
	if n := strings.Count(buf.String(), "\n"); n != 1 || !strings.Contains(buf.String(), "reason=first suppressed=0") {
		t.Fatalf("log = %q, want only the first warning", buf.String())
	}
	w.mu.Lock()
	w.last = time.Now().Add(-warnEvery - time.Second)
	w.mu.Unlock()
	w.warn("outboxotel trace header dropped", "a", "x-4", "fourth")
	if !strings.Contains(buf.String(), "reason=fourth suppressed=2") {
		t.Errorf("log = %q, want the fourth warning counting 2 suppressed", buf.String())
	}
}

func TestTrimList(t *testing.T) {
	for _, c := range []struct {
		key, in string
		limit   int
		want    string
		dropped int
	}{
		{"baggage", "a=1,bb=22,ccc=333", 9, "a=1,bb=22", 1},
		{"baggage", "a=1,bb=22,ccc=333", 3, "a=1", 2},
		{"baggage", "a=1,bb=22,ccc=333", 2, "", 3},
		{"tracestate", "a=1,b=2,c=3", 7, "a=1,b=2", 1},
		{"tracestate", "a=1," + strings.Repeat("x", 130) + ",c=3", 7, "a=1,c=3", 1},
		{"traceparent", "00-aa-bb-01", 5, "", 0},
		{"baggage", "a=1", 0, "", 0},
	} {
		got, dropped := trimList(c.key, c.in, c.limit)
		if got != c.want || dropped != c.dropped {
			t.Errorf("trimList(%s, %.30q, %d) = %q, %d; want %q, %d", c.key, c.in, c.limit, got, dropped, c.want, c.dropped)
		}
	}
}
