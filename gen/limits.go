// An event's limits in events.yaml: concurrency: N, the most handlers of the type one worker
// runs at once, and rate_limit: "N/s" or "N/m", a rate shared by every worker on the table.
// Both go to outbox.Policy as Concurrency and RateLimit.

package gen

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dave/jennifer/jen"
)

// rate is a parsed rate_limit: n per per.
type rate struct {
	n   int
	per time.Duration
}

// Bounds of the limits, the runtime's own: NewWorker refuses what lies outside them.
const (
	maxConcurrency = 100_000
	maxRate        = 1_000_000
)

// ratePer are the units rate_limit: accepts. A bucket refilled per hour or day would let a
// whole hour's messages go at once after a quiet spell, which is no rate to speak of.
var ratePer = map[string]time.Duration{"s": time.Second, "m": time.Minute}

// parseRate reads "50/s" or "3/m".
func parseRate(s string) (rate, error) {
	num, unit, ok := strings.Cut(s, "/")
	if !ok {
		return rate{}, fmt.Errorf(`want N/s or N/m, such as "50/s", found %q`, s)
	}
	per, ok := ratePer[unit]
	if !ok {
		return rate{}, fmt.Errorf(`the unit must be s (per second) or m (per minute), found %q in %q`, unit, s)
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 1 || n > maxRate {
		return rate{}, fmt.Errorf("the number before / must be a whole number from 1 to %d, found %q in %q", maxRate, num, s)
	}
	return rate{n: int(n), per: per}, nil
}

// parseConcurrency reads concurrency:'s value.
func parseConcurrency(s string) (int, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 1 || n > maxConcurrency {
		return 0, fmt.Errorf("must be a whole number from 1 to %d, found %q", maxConcurrency, s)
	}
	return int(n), nil
}

// limits checks an event's concurrency: and rate_limit:.
func (v *validator) limits(d *policyDecl, what string, direct bool) {
	for _, s := range []struct {
		key string
		v   *str
	}{{"concurrency", d.concurrency}, {"rate_limit", d.rateLimit}} {
		if s.v != nil && direct {
			v.ps.add(s.v.p, "%s: %s applies to outbox delivery; a direct event is called in-process by its sender", what, s.key)
		}
	}
	if direct {
		return
	}
	if d.concurrency != nil {
		if _, err := parseConcurrency(d.concurrency.v); err != nil {
			v.ps.add(d.concurrency.p, "%s: concurrency %v", what, err)
		}
	}
	if d.rateLimit != nil {
		if _, err := parseRate(d.rateLimit.v); err != nil {
			v.ps.add(d.rateLimit.p, "%s: rate_limit: %v", what, err)
		}
	}
}

// resolveLimits reads an event's valid limits; validation has reported the others.
func resolveLimits(e *policyDecl) (concurrency int, r rate) {
	if e.concurrency != nil {
		concurrency, _ = parseConcurrency(e.concurrency.v)
	}
	if e.rateLimit != nil {
		r, _ = parseRate(e.rateLimit.v)
	}
	return concurrency, r
}

// limitsCode is the Policy fields of p's limits.
func limitsCode(p policy) []jen.Code {
	var kv []jen.Code
	if p.concurrency > 0 {
		kv = append(kv, jen.Id("Concurrency").Op(":").Lit(p.concurrency))
	}
	if p.rate.n > 0 {
		kv = append(kv, jen.Id("RateLimit").Op(":").Qual(outboxPkg, "Rate").Values(
			jen.Id("N").Op(":").Lit(p.rate.n), jen.Id("Per").Op(":").Add(durationCode(p.rate.per))))
	}
	return kv
}

// describeLimits is describePolicy's part for the limits.
func describeLimits(p policy) []string {
	var parts []string
	if p.concurrency > 0 {
		parts = append(parts, fmt.Sprintf("concurrency %d", p.concurrency))
	}
	if p.rate.n > 0 {
		unit := "s"
		if p.rate.per == time.Minute {
			unit = "m"
		}
		parts = append(parts, fmt.Sprintf("rate_limit %d/%s", p.rate.n, unit))
	}
	return parts
}
