package outbox

import (
	"math"
	"time"
)

// durationFromMicros converts an age the database computed in microseconds into a Duration. It
// saturates at the Duration's range of about 292 years instead of wrapping. A row can be dated
// anywhere from year 1000 to 9999. One due since year 1000 is over a thousand years old.
// Wrapped, that age would read as negative and pass every "older than" check.
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
