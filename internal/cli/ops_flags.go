package cli

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// The flag values more than one operator command takes.

// durationFlag is a flag.Value in parseDurationDays's syntax (Go plus days).
type durationFlag struct {
	d   time.Duration
	set bool
}

func (f *durationFlag) String() string {
	if f == nil {
		return ""
	}
	return formatAge(f.d)
}

func (f *durationFlag) Set(s string) error {
	d, err := parseDurationDays(s)
	if err != nil {
		return err
	}
	f.d, f.set = d, true
	return nil
}

// idsFlag is the repeatable --id.
type idsFlag []outbox.MessageID

func (f *idsFlag) String() string {
	parts := make([]string, len(*f))
	for i, id := range *f {
		parts[i] = strconv.FormatInt(int64(id), 10)
	}
	return strings.Join(parts, ",")
}

func (f *idsFlag) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return fmt.Errorf("want a positive message id, got %q", s)
	}
	for _, id := range *f {
		if id == outbox.MessageID(n) {
			return nil // given twice: one message, so the "did not match" count stays true
		}
	}
	*f = append(*f, outbox.MessageID(n))
	return nil
}
