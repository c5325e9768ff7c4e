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

// parseDurationDays accepts Go's time.ParseDuration syntax plus a "d" unit of 24 hours, alone or
// mixed with the others: 7d, 36h, 1d12h, 1.5d, 90m. Retention and windows are naturally said
// in days, which Go's syntax lacks. A day is 24h: these are ages, not calendar dates.
func parseDurationDays(s string) (time.Duration, error) {
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
			return 0, fmt.Errorf("invalid duration %q (want Go syntax or days: 7d, 36h, 1d12h)", orig)
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
			return 0, fmt.Errorf("invalid duration %q (want Go syntax or days: 7d, 36h, 1d12h)", orig)
		}
		total += float64(d)
	}
	if total > math.MaxInt64 {
		return 0, fmt.Errorf("invalid duration %q: too long", orig)
	}
	d := time.Duration(total)
	if neg {
		d = -d
	}
	return d, nil
}

// formatAge prints a duration for people, in whole seconds, with days when long and without
// zero units: 2d, 1h, 3m12s, 2d2h30s. parseDurationDays reads it back.
func formatAge(d time.Duration) string { return health.FormatAge(d) }
