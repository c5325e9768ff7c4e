package cli

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/outboxgen/outboxgen/internal/health"
)

// maxDuration bounds every duration flag: a century is longer than any retention or window
// anyone means, and far inside a Duration's 292 years, so nothing computed from a flag's value
// (a cutoff, an age, its printed form) can overflow.
const maxDuration = 36500 * 24 * time.Hour

// parseDurationDays accepts Go's time.ParseDuration syntax plus a "d" unit of 24 hours, alone or
// mixed with the others: 7d, 36h, 1d12h, 1.5d, 90m. Retention and windows are naturally said
// in days, which Go's syntax lacks. A day is 24h: these are ages, not calendar dates. Durations
// longer than maxDuration either way are refused.
func parseDurationDays(s string) (time.Duration, error) {
	d, err := parseDurationUnbounded(s)
	if err != nil {
		return 0, err
	}
	if d > maxDuration || d < -maxDuration {
		return 0, fmt.Errorf("duration %q is too long: at most %s", s, formatAge(maxDuration))
	}
	return d, nil
}

func parseDurationUnbounded(s string) (time.Duration, error) {
	orig := s
	if s == "" {
		return 0, errors.New("empty duration")
	}
	neg := false
	if s[0] == '-' || s[0] == '+' {
		neg = s[0] == '-'
		s = s[1:]
	}
	if s == "0" {
		return 0, nil
	}
	if !strings.Contains(s, "d") {
		d, err := time.ParseDuration(orig)
		if err != nil {
			return 0, durationErr(orig)
		}
		return d, nil
	}
	var total float64 // nanoseconds; float so that 1.5d works, checked for overflow below
	for s != "" {
		i := 0
		for i < len(s) && (s[i] == '.' || (s[i] >= '0' && s[i] <= '9')) {
			i++
		}
		num := s[:i]
		j := i
		for j < len(s) && s[j] != '.' && (s[j] < '0' || s[j] > '9') {
			j++
		}
		unit := s[i:j]
		s = s[j:]
		if num == "" || unit == "" {
			return 0, fmt.Errorf("invalid duration %q (want Go syntax or days: 7d, 36h, 1d12h)", orig)
		}
		if unit == "d" {
			n, err := strconv.ParseFloat(num, 64)
			if err != nil {
				return 0, fmt.Errorf("invalid duration %q: %q is not a number", orig, num)
			}
			total += n * float64(24*time.Hour)
			continue
		}
		d, err := time.ParseDuration(num + unit)
		if err != nil {
			return 0, durationErr(orig)
		}
		total += float64(d)
	}
	// float64(math.MaxInt64) is 2^63, one past the largest Duration: equal is too long as well,
	// and converting it would wrap to a negative Duration.
	if !(total < math.MaxInt64) {
		return 0, fmt.Errorf("duration %q is too long: at most %s", orig, formatAge(maxDuration))
	}
	d := time.Duration(total)
	if neg {
		d = -d
	}
	return d, nil
}

// durationErr says why time.ParseDuration refused a duration: it reports an overflow in the
// same words as a syntax error, so the bound is named too.
func durationErr(orig string) error {
	return fmt.Errorf("invalid duration %q (want Go syntax or days: 7d, 36h, 1d12h; at most %s)", orig, formatAge(maxDuration))
}

// formatAge prints a duration for people, in whole seconds, with days when long and without
// zero units: 2d, 1h, 3m12s, 2d2h30s. parseDurationDays reads it back.
func formatAge(d time.Duration) string { return health.FormatAge(d) }

// secondsAge converts an age in seconds (the JSON reports' unit) back to a Duration, saturating
// where it would not fit: the runtime saturates ages of rows dated centuries ago, and converting
// a float64 out of int64's range gives an arbitrary value.
func secondsAge(s float64) time.Duration {
	ns := s * float64(time.Second)
	switch {
	case ns >= math.MaxInt64: // float64(math.MaxInt64) is 2^63
		return math.MaxInt64
	case ns <= math.MinInt64:
		return math.MinInt64
	}
	return time.Duration(ns)
}
