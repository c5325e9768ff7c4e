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
// messages that FAILED within window and paused the event types an operator paused.
func alerts(s outbox.Snapshot, maxDueAge, maxHeldAge, window time.Duration, failedInWindow int64, paused []outbox.PausedType, clean func(string) string) []alert {
	types := map[string]bool{}
	for _, p := range paused {
		types[p.EventType] = true
	}
	return health.Problems(s, health.Limits{MaxDueAge: maxDueAge, MaxHeldAge: maxHeldAge, Window: window, Paused: types}, failedInWindow, clean)
}
