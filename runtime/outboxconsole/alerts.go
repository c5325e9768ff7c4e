package outboxconsole

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// alert is one problem the overview shows above the table. The sentences are those of
// `outboxgen status --check` (internal/cli/status.go), so the console, the CLI and a probe's
// alert read the same.
type alert struct {
	Level string // "page" (a person must act now), "ticket" or "info"
	Text  string
}

// alerts derives the overview's alerts from a snapshot, with failedInWindow the number of
// messages that FAILED within window.
func alerts(s outbox.Snapshot, maxDueAge, maxHeldAge, window time.Duration, failedInWindow int64, clean func(string) string) []alert {
	var out []alert
	if s.Stuck > 0 {
		out = append(out, alert{Level: "page",
			Text: fmt.Sprintf("%d message(s) stuck PROCESSING past 3x their lease: nobody is reclaiming", s.Stuck)})
	}
	if maxDueAge > 0 && s.OldestDue > maxDueAge {
		// Claims go oldest first, so a live fleet behind a big backlog also shows a long wait;
		// rows PROCESSING within their lease tell "behind" from "nobody claims".
		var idle, behind []string
		for t, tc := range s.ByType {
			if tc.OldestDue > maxDueAge {
				if tc.Processing > tc.Stale {
					behind = append(behind, clean(t))
				} else {
					idle = append(idle, clean(t))
				}
			}
		}
		sort.Strings(idle)
		sort.Strings(behind)
		if len(idle) > 0 {
			out = append(out, alert{Level: "page", Text: fmt.Sprintf(
				"due messages have waited more than %s and nobody claims them: are the workers for %s running?",
				formatAge(maxDueAge), strings.Join(idle, ", "))})
		}
		if len(behind) > 0 {
			out = append(out, alert{Level: "page", Text: fmt.Sprintf(
				"due messages have waited more than %s: the workers for %s are claiming but behind",
				formatAge(maxDueAge), strings.Join(behind, ", "))})
		}
	}
	if maxHeldAge > 0 && s.OldestHeld > maxHeldAge {
		out = append(out, alert{Level: "page", Text: fmt.Sprintf(
			"%d ordering key(s) held, the oldest for more than %s: retry or purge their head messages (outboxgen status lists them)",
			s.HeldKeys, formatAge(maxHeldAge))})
	}
	if failedInWindow > 0 {
		out = append(out, alert{Level: "ticket",
			Text: fmt.Sprintf("%d message(s) FAILED within the last %s", failedInWindow, formatAge(window))})
	}
	if s.Stale > s.Stuck {
		out = append(out, alert{Level: "info",
			Text: fmt.Sprintf("%d message(s) PROCESSING past their lease: their worker died or hung; a live worker reclaims them", s.Stale-s.Stuck)})
	}
	return out
}

// formatAge prints a duration as the CLI does: 1d2h, 3m12s, 0s.
func formatAge(d time.Duration) string {
	d = d.Round(time.Second)
	if d < 0 {
		return "-" + formatAge(-d)
	}
	var b strings.Builder
	for _, u := range []struct {
		size time.Duration
		name string
	}{{24 * time.Hour, "d"}, {time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}} {
		if n := d / u.size; n > 0 || (u.name == "s" && b.Len() == 0) {
			fmt.Fprintf(&b, "%d%s", n, u.name)
			d -= n * u.size
		}
	}
	return b.String()
}
