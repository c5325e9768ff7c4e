package outbox

import (
	"math"
	"time"
)

// durationFromMicros converts an age the database computed in microseconds (TIMESTAMPDIFF) into
// a Duration, saturating at the Duration's range (about 292 years) instead of wrapping. A row
// can be dated anywhere from year 1000 to 9999: one due since year 1000 is over a thousand
// years old, and wrapped, that age reads as negative and passes every "older than" check.
func durationFromMicros(us int64) time.Duration {
	const limit = math.MaxInt64 / int64(time.Microsecond)
	switch {
	case us > limit:
		return math.MaxInt64
	case us < -limit:
		return math.MinInt64
	}
	return time.Duration(us) * time.Microsecond
}
