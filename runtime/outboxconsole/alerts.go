package outboxconsole

import (
	"time"

	"github.com/outboxgen/outboxgen/internal/health"
	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// alert is one problem the overview shows above the table, worded as `outboxgen status --check`
// words it: both come from internal/health.
type alert = health.Problem

// alerts derives the overview's alerts from a snapshot, with failedInWindow the number of
// messages that FAILED within window.
func alerts(s outbox.Snapshot, maxDueAge, maxHeldAge, window time.Duration, failedInWindow int64, clean func(string) string) []alert {
	return health.Problems(s, health.Limits{MaxDueAge: maxDueAge, MaxHeldAge: maxHeldAge, Window: window}, failedInWindow, clean)
}
