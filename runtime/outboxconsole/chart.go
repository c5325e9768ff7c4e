package outboxconsole

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// The chart is an inline SVG drawn on the server from the samples (no script needed): one panel
// for the backlog (PENDING, PROCESSING, FAILED), one for the throughput (enqueued and delivered
// per minute), each over the last hour. Only numbers computed here reach the SVG.

// Panel geometry, in SVG user units; the stylesheet scales the picture to the page's width.
const (
	chartW    = 720.0
	chartH    = 150.0
	chartLeft = 48.0 // room for the y labels
	chartTop  = 10.0
	chartPadB = 22.0 // room for the x labels
)

type chartPanel struct {
	Title   string
	ViewBox string
	Width   float64
	Height  float64
	Left    float64
	Right   float64
	Top     float64
	Bottom  float64
	YTicks  []chartTick
	XTicks  []chartTick
	Series  []chartSeries
	Empty   bool
	MidX    float64 // where "no samples yet" goes
	MidY    float64
	Summary string // the panel in one sentence, for screen readers and the <title>
}

type chartTick struct {
	Pos   float64 // y for YTicks, x for XTicks
	Label string
}

type chartSeries struct {
	Name    string
	Class   string
	Points  string // "x,y x,y ..."
	LastX   float64
	LastY   float64
	Last    string // the newest value, for the legend
	HasLast bool
}

type seriesData struct {
	name, class string
	at          []time.Time
	values      []float64
	format      func(float64) string
}

// span is the chart's width in time: the last hour, or less while the console has sampled for
// less (but at least minSpan), so a console started a minute ago draws its minute across the
// whole width instead of a sliver at the right edge.
func span(samples []sample, now time.Time, minSpan time.Duration) time.Duration {
	if len(samples) == 0 {
		return history
	}
	return min(max(now.Sub(samples[0].At), minSpan), history)
}

// panel draws series over [now-width, now].
func panel(title string, now time.Time, width time.Duration, data []seriesData) chartPanel {
	p := chartPanel{
		Title: title, Width: chartW, Height: chartH + chartTop + chartPadB,
		Left: chartLeft, Right: chartW - 22, Top: chartTop, Bottom: chartTop + chartH,
	}
	p.ViewBox = fmt.Sprintf("0 0 %g %g", p.Width, p.Height)
	p.MidX, p.MidY = (p.Left+p.Right)/2, (p.Top+p.Bottom)/2
	start := now.Add(-width)
	x := func(t time.Time) float64 {
		f := float64(t.Sub(start)) / float64(width)
		return round1(p.Left + math.Max(0, math.Min(1, f))*(p.Right-p.Left))
	}
	top := 0.0
	points := 0
	for _, d := range data {
		for i, v := range d.values {
			if !d.at[i].Before(start) {
				top = math.Max(top, v)
				points++
			}
		}
	}
	p.Empty = points == 0
	scale := niceCeil(top)
	y := func(v float64) float64 { return round1(p.Bottom - v/scale*(p.Bottom-p.Top)) }
	for _, f := range []float64{0, 0.5, 1} {
		p.YTicks = append(p.YTicks, chartTick{Pos: y(f * scale), Label: compact(f * scale)})
	}
	for q := 4; q >= 0; q-- {
		back := (width * time.Duration(q) / 4).Round(time.Second)
		label := "−" + formatAge(back)
		if q == 0 {
			label = "now"
		}
		p.XTicks = append(p.XTicks, chartTick{Pos: x(now.Add(-back)), Label: label})
	}
	var summary []string
	for _, d := range data {
		s := chartSeries{Name: d.name, Class: d.class}
		var pts []string
		for i, v := range d.values {
			if d.at[i].Before(start) {
				continue
			}
			px, py := x(d.at[i]), y(v)
			pts = append(pts, strconv.FormatFloat(px, 'f', -1, 64)+","+strconv.FormatFloat(py, 'f', -1, 64))
			s.LastX, s.LastY, s.Last, s.HasLast = px, py, d.format(v), true
		}
		s.Points = strings.Join(pts, " ")
		if s.HasLast {
			summary = append(summary, d.name+" "+s.Last)
		}
		p.Series = append(p.Series, s)
	}
	if p.Empty {
		p.Summary = title + ": no samples yet"
	} else {
		p.Summary = title + " over the last " + formatAge(width) + "; now: " + strings.Join(summary, ", ")
	}
	return p
}

// charts draws the two panels from the samples, at least minSpan wide.
func charts(samples []sample, now time.Time, minSpan time.Duration) []chartPanel {
	width := span(samples, now, minSpan)
	var at []time.Time
	var pending, processing, failed []float64
	for _, s := range samples {
		at = append(at, s.At)
		pending = append(pending, float64(s.Pending))
		processing = append(processing, float64(s.Processing))
		failed = append(failed, float64(s.Failed))
	}
	count := func(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }
	perMin := func(v float64) string { return compact(v) + "/min" }
	var rAt []time.Time
	var enq, done []float64
	for _, r := range rates(samples) {
		rAt = append(rAt, r.At)
		enq = append(enq, r.Enqueued)
		done = append(done, r.Done)
	}
	return []chartPanel{
		panel("Backlog", now, width, []seriesData{
			{name: "pending", class: "s-pending", at: at, values: pending, format: count},
			{name: "processing", class: "s-processing", at: at, values: processing, format: count},
			{name: "failed", class: "s-failed", at: at, values: failed, format: count},
		}),
		panel("Throughput", now, width, []seriesData{
			{name: "enqueued", class: "s-enqueued", at: rAt, values: enq, format: perMin},
			{name: "delivered", class: "s-sent", at: rAt, values: done, format: perMin},
		}),
	}
}

// niceCeil is the smallest 1, 2 or 5 times a power of ten at or above v (1 for v <= 1).
func niceCeil(v float64) float64 {
	if v <= 1 || math.IsNaN(v) || math.IsInf(v, 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

// compact prints a count or rate briefly: 0, 2.5, 40, 1.2k, 3M.
func compact(v float64) string {
	switch {
	case v >= 1e6:
		return trimZero(strconv.FormatFloat(v/1e6, 'f', 1, 64)) + "M"
	case v >= 1e3:
		return trimZero(strconv.FormatFloat(v/1e3, 'f', 1, 64)) + "k"
	case v >= 10 || v == math.Trunc(v):
		return strconv.FormatFloat(v, 'f', 0, 64)
	default:
		return trimZero(strconv.FormatFloat(v, 'f', 1, 64))
	}
}

func trimZero(s string) string { return strings.TrimSuffix(s, ".0") }

func round1(f float64) float64 { return math.Round(f*10) / 10 }
