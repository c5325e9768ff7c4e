package health

import (
	"fmt"
	"strings"

	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// failingTypes reports the event types whose handlers keep failing, before their first message
// runs out of attempts. A paused one is information: the operator has seen it already.
func failingTypes(s outbox.Snapshot, lim Limits, clean func(string) string) []Problem {
	var active, paused []string
	for _, t := range s.Failing {
		if lim.Paused[t] {
			paused = append(paused, clean(t))
		} else {
			active = append(active, clean(t))
		}
	}
	var out []Problem
	if len(active) > 0 {
		out = append(out, Problem{Level: "page", Text: fmt.Sprintf(
			"the handlers of %s keep failing: messages wait for retries and none was sent in the last 30s; is the provider down? (outboxgen pause TYPE holds them)",
			strings.Join(active, ", "))})
	}
	if len(paused) > 0 {
		out = append(out, Problem{Level: "info", Text: fmt.Sprintf(
			"the handlers of %s were failing when the type was paused", strings.Join(paused, ", "))})
	}
	return out
}
