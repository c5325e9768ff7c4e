package outboxconsole

import (
	"strings"
	"time"
	"unicode/utf8"

	"github.com/outboxgen/outboxgen/internal/health"
)

// How the pages print times, durations and one-line texts.

// formatAge prints a duration as the CLI does: 1d2h, 3m12s, 0s.
func formatAge(d time.Duration) string { return health.FormatAge(d) }

// ageIf prints an age, or "-" when nothing is counted (as `outboxgen status` does).
func ageIf(n int64, d time.Duration) string {
	if n == 0 {
		return "-"
	}
	return formatAge(d)
}

// stamp prints a database time (UTC) to the millisecond.
func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05.000")
}

// ago prints how long before now t was ("3m12s ago"), or after ("in 40s").
func ago(now, t time.Time) string {
	if t.IsZero() {
		return ""
	}
	if d := now.Sub(t); d >= 0 {
		return formatAge(d) + " ago"
	}
	return "in " + formatAge(t.Sub(now))
}

// formatInterval prints a sampling interval: 10s, or 250ms below a second.
func formatInterval(d time.Duration) string {
	if d < time.Second {
		return d.String()
	}
	return formatAge(d)
}

// formatTook prints how long a job run took: to the millisecond below a second.
func formatTook(d time.Duration) string {
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return formatAge(d)
}

// oneLine joins the words of s with single spaces: line breaks and runs of blanks go.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// truncate cuts s after n characters, marking the cut with "…". A byte that is not UTF-8
// counts as one character and stays as it is, for visibleLine to escape.
func truncate(s string, n int) string {
	for i := 0; i < len(s); n-- {
		if n == 0 {
			return s[:i] + "…"
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return s
}
