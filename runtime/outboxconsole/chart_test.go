package outboxconsole

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestRatesDerivesDeliveries: deliveries are the new ids less what stayed in the backlog and
// what went FAILED, per minute, never negative.
func TestRatesDerivesDeliveries(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	got := rates([]sample{
		{At: t0, Pending: 10, Processing: 2, Failed: 1, MaxID: 100},
		// +60 ids in 30s; backlog 12 -> 20 (+8); failed +2: 50 delivered.
		{At: t0.Add(30 * time.Second), Pending: 18, Processing: 2, Failed: 3, MaxID: 160},
		// An operator retried 3 FAILED: backlog +3, failed -3, no new id: 0 delivered, not -3... and 0 failed.
		{At: t0.Add(60 * time.Second), Pending: 21, Processing: 2, Failed: 0, MaxID: 160},
	})
	if len(got) != 2 {
		t.Fatalf("rates = %+v, want 2", got)
	}
	if got[0].Enqueued != 120 || got[0].Done != 100 || got[0].Failed != 4 {
		t.Errorf("first interval = %+v, want enqueued 120/min, delivered 100/min, failed 4/min", got[0])
	}
	if got[1].Enqueued != 0 || got[1].Done != 0 || got[1].Failed != 0 {
		t.Errorf("retry interval = %+v, want all zero", got[1])
	}
}

// TestChartDrawsTheLastHour: points inside the plot, only numbers in the SVG data, samples older
// than an hour left out, a note when there is nothing to draw.
func TestChartDrawsTheLastHour(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	var samples []sample
	for i := 0; i <= 80; i++ { // 80 minutes, one a minute: the first 20 are outside the hour
		samples = append(samples, sample{At: now.Add(time.Duration(i-80) * time.Minute), Pending: int64(i * 3), MaxID: int64(i * 10)})
	}
	panels := charts(samples, now, time.Minute)
	if len(panels) != 2 || panels[0].Title != "Backlog" || panels[1].Title != "Throughput" {
		t.Fatalf("panels = %+v", panels)
	}
	backlog := panels[0]
	pending := backlog.Series[0]
	pts := strings.Fields(pending.Points)
	if len(pts) != 61 {
		t.Errorf("pending has %d points, want 61 (the last hour, one a minute)", len(pts))
	}
	if pending.Last != "240" || backlog.YTicks[2].Label != "500" {
		t.Errorf("last pending %q, top tick %q: want 240 and 500", pending.Last, backlog.YTicks[2].Label)
	}
	for _, p := range pts {
		if strings.ContainsAny(p, "NnIi") {
			t.Fatalf("point %q is not a number", p)
		}
		var x, y float64
		if _, err := fmtSscan(p, &x, &y); err != nil || x < backlog.Left || x > backlog.Right || y < backlog.Top || y > backlog.Bottom {
			t.Errorf("point %q outside the plot [%g..%g]x[%g..%g]", p, backlog.Left, backlog.Right, backlog.Top, backlog.Bottom)
		}
	}
	if panels[0].XTicks[0].Label != "−1h" || panels[0].XTicks[2].Label != "−30m" || panels[0].XTicks[4].Label != "now" {
		t.Errorf("x ticks %+v, want −1h … −30m … now", panels[0].XTicks)
	}
	if !strings.Contains(panels[1].Summary, "enqueued 10/min") {
		t.Errorf("throughput summary %q, want enqueued 10/min", panels[1].Summary)
	}
	// A console that has sampled for 2 minutes draws them across the whole width.
	young := charts(samples[78:], now, time.Minute)[0]
	if young.XTicks[0].Label != "−2m" || !strings.HasPrefix(young.Series[0].Points, fmt.Sprint(young.Left)+",") {
		t.Errorf("a young chart starts at %q with points %q; want −2m and its first point at the left edge", young.XTicks[0].Label, young.Series[0].Points)
	}
	empty := charts(nil, now, time.Minute)
	if !empty[0].Empty || !strings.Contains(empty[0].Summary, "no samples yet") {
		t.Errorf("an empty chart = %+v", empty[0])
	}
}

func fmtSscan(p string, x, y *float64) (int, error) {
	xs, ys, _ := strings.Cut(p, ",")
	var err error
	if *x, err = parseF(xs); err != nil {
		return 0, err
	}
	*y, err = parseF(ys)
	return 2, err
}

func parseF(s string) (float64, error) { return strconv.ParseFloat(s, 64) }

func TestNiceCeilAndCompact(t *testing.T) {
	for v, want := range map[float64]float64{0: 1, 0.3: 1, 1: 1, 1.1: 2, 3: 5, 7: 10, 10: 10, 11: 20, 240: 500, 1e6 + 1: 2e6} {
		if got := niceCeil(v); got != want {
			t.Errorf("niceCeil(%g) = %g, want %g", v, got, want)
		}
	}
	if niceCeil(math.NaN()) != 1 {
		t.Error("niceCeil(NaN) != 1")
	}
	for v, want := range map[float64]string{0: "0", 2.5: "2.5", 40: "40", 1234: "1.2k", 3e6: "3M", 0.25: "0.2"} {
		if got := compact(v); got != want {
			t.Errorf("compact(%g) = %q, want %q", v, got, want)
		}
	}
}

// TestSamplerKeepsAnHour: the sampler reads Stats and the newest id, and keeps an hour.
func TestSamplerKeepsAnHour(t *testing.T) {
	t.Parallel()
	b := setup(t)
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	s := newSampler(b.db.DB, time.Minute, func() time.Time { return now })
	id := b.enqueue("a", `{}`)
	b.failed("a", 10, "x")
	for i := 0; i < 70; i++ {
		s.sampleOnce(context.Background())
		now = now.Add(time.Minute)
	}
	got, _, err := s.snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 61 {
		t.Errorf("kept %d samples of one a minute, want 61 (an hour)", len(got))
	}
	last := got[len(got)-1]
	if last.Pending != 1 || last.Failed != 1 || last.MaxID != int64(id)+1 {
		t.Errorf("last sample %+v, want pending 1, failed 1, max id %d", last, int64(id)+1)
	}
}
