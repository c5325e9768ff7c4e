package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// parseRate reads -rate-limit: "N/s" or "N/m", or "" for no limit.
func parseRate(s string) (outbox.Rate, error) {
	if s == "" {
		return outbox.Rate{}, nil
	}
	num, unit, _ := strings.Cut(s, "/")
	per := map[string]time.Duration{"s": time.Second, "m": time.Minute}[unit]
	n, err := strconv.Atoi(num)
	if err != nil || n < 1 || per == 0 {
		return outbox.Rate{}, fmt.Errorf(`want N/s or N/m, found %q`, s)
	}
	return outbox.Rate{N: n, Per: per}, nil
}
