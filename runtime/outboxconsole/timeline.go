package outboxconsole

import (
	"sort"
	"strconv"
	"time"

	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// The message page's reading of a record: its status in words and its times in order.

// timelineEntry is one time of a message's life; at orders the entries.
type timelineEntry struct {
	at    time.Time
	At    string
	What  string
	Note  string
	Class string
}

// explain says in a few words what a message's status means for it now.
func explain(rec outbox.Record, now time.Time) string {
	switch rec.Status {
	case outbox.StatusPending:
		if rec.NextAttemptAt.After(now) {
			return "due in " + formatAge(rec.NextAttemptAt.Sub(now)) + " (backoff or delay)"
		}
		return "due: waiting for a worker"
	case outbox.StatusProcessing:
		lease := rec.ReclaimAfter.Sub(rec.ClaimedAt)
		switch {
		case lease > 0 && now.Sub(rec.ClaimedAt) > 3*lease:
			return "stuck: past 3x its lease, nobody is reclaiming"
		case now.After(rec.ReclaimAfter):
			return "stale: past its lease; a live worker reclaims it"
		}
		return "a worker's handler has it; lease until " + stamp(rec.ReclaimAfter)
	case outbox.StatusSent:
		return "delivered"
	case outbox.StatusFailed:
		return "not tried again until someone retries it"
	}
	return ""
}

// timeline lists the row's times in order: what the table knows of the message's life (one
// claim, the last; attempts counts them all).
func timeline(rec outbox.Record, now time.Time) []timelineEntry {
	var out []timelineEntry
	add := func(t time.Time, what, class string) {
		if t.IsZero() {
			return
		}
		out = append(out, timelineEntry{at: t, At: stamp(t), What: what, Note: ago(now, t), Class: class})
	}
	add(rec.CreatedAt, "enqueued", "t-created")
	switch {
	case rec.Status == outbox.StatusPending && rec.Attempts > 0:
		add(rec.NextAttemptAt, "due again (attempt "+strconv.Itoa(rec.Attempts+1)+" of "+strconv.Itoa(rec.MaxAttempts)+")", "t-due")
	case rec.Status == outbox.StatusPending:
		add(rec.NextAttemptAt, "due", "t-due")
	case !rec.NextAttemptAt.Equal(rec.CreatedAt):
		add(rec.NextAttemptAt, "last due", "t-due")
	}
	if !rec.ClaimedAt.IsZero() {
		add(rec.ClaimedAt, "claimed (attempt "+strconv.Itoa(rec.Attempts)+" of "+strconv.Itoa(rec.MaxAttempts)+", the last claim)", "t-claim")
		if rec.Status == outbox.StatusProcessing {
			add(rec.ReclaimAfter, "lease ends", "t-lease")
		}
	}
	add(rec.SentAt, "sent", "t-sent")
	add(rec.FailedAt, "failed", "t-failed")
	sort.SliceStable(out, func(i, j int) bool { return out[i].at.Before(out[j].at) })
	return out
}
