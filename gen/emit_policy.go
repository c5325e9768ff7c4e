package gen

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dave/jennifer/jen"
)

// policyCode is the outbox.Policy literal of what the catalog set; zero fields are left out
// and mean the runtime's default.
func policyCode(p policy) jen.Code {
	var kv []jen.Code
	if p.maxAttempts > 0 {
		kv = append(kv, jen.Id("MaxAttempts").Op(":").Lit(p.maxAttempts))
	}
	if p.initial > 0 || p.max > 0 {
		var b []jen.Code
		if p.initial > 0 {
			b = append(b, jen.Id("Initial").Op(":").Add(durationCode(p.initial)))
		}
		if p.max > 0 {
			b = append(b, jen.Id("Max").Op(":").Add(durationCode(p.max)))
		}
		kv = append(kv, jen.Id("Backoff").Op(":").Qual(outboxPkg, "Backoff").Values(b...))
	}
	if p.timeout > 0 {
		kv = append(kv, jen.Id("Timeout").Op(":").Add(durationCode(p.timeout)))
	}
	if p.deleteWhenSent {
		kv = append(kv, jen.Id("DeleteWhenSent").Op(":").True())
	}
	kv = append(kv, limitsCode(p)...)
	if len(kv) > 1 {
		// One field per line reads better than a long literal inside a call.
		for i := range kv {
			kv[i] = jen.Line().Add(kv[i])
		}
		kv = append(kv, jen.Line())
	}
	return jen.Qual(outboxPkg, "Policy").Values(kv...)
}

func describePolicy(p policy) string {
	var parts []string
	if p.maxAttempts > 0 {
		parts = append(parts, fmt.Sprintf("max_attempts %d", p.maxAttempts))
	}
	if p.initial > 0 || p.max > 0 {
		b := "backoff"
		if p.initial > 0 {
			b += " from " + shortDuration(p.initial)
		}
		if p.max > 0 {
			b += " up to " + shortDuration(p.max)
		}
		parts = append(parts, b)
	}
	if p.timeout > 0 {
		parts = append(parts, "timeout "+shortDuration(p.timeout))
	}
	if p.deleteWhenSent {
		parts = append(parts, "delete_when_sent true")
	}
	parts = append(parts, describeLimits(p)...)
	if len(parts) == 0 {
		return "the runtime's default policy"
	}
	return "the catalog's " + strings.Join(parts, ", ") + " (the runtime's default for the rest)"
}

// durationCode writes d the way a person would: 30 * time.Second, time.Hour.
func durationCode(d time.Duration) jen.Code {
	units := []struct {
		d    time.Duration
		name string
	}{{time.Hour, "Hour"}, {time.Minute, "Minute"}, {time.Second, "Second"}, {time.Millisecond, "Millisecond"}, {time.Microsecond, "Microsecond"}}
	for _, u := range units {
		if d%u.d == 0 {
			if d == u.d {
				return jen.Qual("time", u.name)
			}
			return jen.Id(strconv.FormatInt(int64(d/u.d), 10)).Op("*").Qual("time", u.name)
		}
	}
	return jen.Qual("time", "Duration").Parens(jen.Id(strconv.FormatInt(int64(d), 10)))
}

// shortDuration prints d without zero units: 1m, 1h30m, 1.5s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}
