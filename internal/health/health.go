// Package health turns an outbox.Snapshot into the problems an operator is told about, in one
// wording for `outboxgen status --check` and the console's alerts.
package health

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// Limits are what the outbox is held to; 0 turns a limit off.
type Limits struct {
	MaxDueAge  time.Duration // a due message waiting longer: nobody claims, or the workers are behind
	MaxHeldAge time.Duration // an ordering key held longer
	Window     time.Duration // a message FAILED within it

	// Paused holds the event types an operator paused. Their due messages wait on purpose, so
	// a long wait of theirs is information, not a page.
	Paused map[string]bool
}

// Problem is one sentence for a person. Level is "page" (a person must act now), "ticket", or
// "info" (the console shows it; status --check does not fail on it).
type Problem struct {
	Level string
	Text  string
}

// Problems derives the problems from a snapshot, with failedInWindow the number of messages that
// FAILED within lim.Window and clean the masking applied to event types. Limits of 0 are off.
func Problems(s outbox.Snapshot, lim Limits, failedInWindow int64, clean func(string) string) []Problem {
	maxDueAge, maxHeldAge, window := lim.MaxDueAge, lim.MaxHeldAge, lim.Window
	var out []Problem
	if s.Stuck > 0 {
		out = append(out, Problem{Level: "page",
			Text: fmt.Sprintf("%d message(s) stuck PROCESSING past 3x their lease: nobody is reclaiming", s.Stuck)})
	}
	out = append(out, failingTypes(s, lim, clean)...)
	if maxDueAge > 0 && s.OldestDue > maxDueAge {
		// Claims go oldest first, so a live fleet behind a big backlog also shows a long wait;
		// rows PROCESSING within their lease tell "behind" from "nobody claims".
		var idle, behind, paused []string
		for t, tc := range s.ByType {
			if tc.OldestDue > maxDueAge {
				if lim.Paused[t] {
					paused = append(paused, clean(t))
				} else if tc.Processing > tc.Stale {
					behind = append(behind, clean(t))
				} else {
					idle = append(idle, clean(t))
				}
			}
		}
		sort.Strings(idle)
		sort.Strings(behind)
		sort.Strings(paused)
		if len(paused) > 0 {
			out = append(out, Problem{Level: "info", Text: fmt.Sprintf(
				"due messages of %s have waited more than %s because the type is paused: outboxgen resume TYPE delivers them",
				strings.Join(paused, ", "), FormatAge(maxDueAge))})
		}
		if len(idle) > 0 {
			out = append(out, Problem{Level: "page", Text: fmt.Sprintf(
				"due messages have waited more than %s and nobody claims them: are the workers for %s running?",
				FormatAge(maxDueAge), strings.Join(idle, ", "))})
		}
		if len(behind) > 0 {
			out = append(out, Problem{Level: "page", Text: fmt.Sprintf(
				"due messages have waited more than %s: the workers for %s are claiming but behind",
				FormatAge(maxDueAge), strings.Join(behind, ", "))})
		}
	}
	if maxHeldAge > 0 && s.OldestHeld > maxHeldAge {
		out = append(out, Problem{Level: "page", Text: fmt.Sprintf(
			"%d ordering key(s) held, the oldest for more than %s: retry or purge their head messages (outboxgen status lists them)",
			s.HeldKeys, FormatAge(maxHeldAge))})
	}
	if s.BrokenKeys > 0 {
		out = append(out, Problem{Level: "page", Text: fmt.Sprintf(
			"%d ordering key(s) broken: a row was changed by hand and the key cannot move until a running worker repairs it (outboxgen status lists them)",
			s.BrokenKeys)})
	}
	if failedInWindow > 0 {
		out = append(out, Problem{Level: "ticket",
			Text: fmt.Sprintf("%d message(s) FAILED within the last %s", failedInWindow, FormatAge(window))})
	}
	if s.Stale > s.Stuck {
		out = append(out, Problem{Level: "info",
			Text: fmt.Sprintf("%d message(s) PROCESSING past their lease: their worker died or hung; a live worker reclaims them", s.Stale-s.Stuck)})
	}
	return out
}

// FormatAge prints a duration for people, in whole seconds, with days when long and without
// zero units: 2d, 1h, 3m12s, 2d2h30s (the CLI's parseDurationDays reads it back). It takes any
// Duration: a negative one gets a sign, and the two ends of the range, where the runtime
// saturates an age too large to hold (a row dated in year 1000), print as bounds (>106751d...).
func FormatAge(d time.Duration) string {
	sign := ""
	switch {
	case d == math.MaxInt64:
		sign = ">"
	case d == math.MinInt64:
		sign = "<-"
		d = math.MaxInt64 // |MinInt64| is one more, which whole seconds do not show
	case d < 0:
		sign = "-"
		d = -d
	}
	secs := int64(d / time.Second)
	if d%time.Second >= time.Second/2 {
		secs++ // rounded half away from zero, as Duration.Round
	}
	if secs == 0 {
		return "0s"
	}
	var b strings.Builder
	b.WriteString(sign)
	signLen := b.Len()
	for _, u := range []struct {
		size int64
		name string
	}{{86400, "d"}, {3600, "h"}, {60, "m"}, {1, "s"}} {
		if n := secs / u.size; n > 0 || (u.name == "s" && b.Len() == signLen) {
			fmt.Fprintf(&b, "%d%s", n, u.name)
			secs -= n * u.size
		}
	}
	return b.String()
}
