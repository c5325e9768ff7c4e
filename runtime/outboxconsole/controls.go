package outboxconsole

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// The on-call controls: pause and resume an event type, cancel PENDING messages, and make
// PENDING messages that wait for a backoff due now. Cancel and run now go through write
// (actions.go): a confirmation page with the dry run's count, then Confirm. A pause changes one
// row and a resume undoes it, so both take effect at once, without a confirmation. Every post
// passes checkWrite and is logged.

// maxPauseReason and maxPauseType mirror outbox.Pause's limits, so a form that breaks them is
// answered 400 before the database is asked.
const (
	maxPauseReason = 1000
	maxPauseType   = 191
	maxPauseFor    = 36500 * 24 * time.Hour
)

func (c *Console) cancelMessages(w http.ResponseWriter, r *http.Request) { c.write(w, r, "cancel") }
func (c *Console) runNow(w http.ResponseWriter, r *http.Request)         { c.write(w, r, "runnow") }
func (c *Console) pause(w http.ResponseWriter, r *http.Request)          { c.pauseWrite(w, r, "pause") }
func (c *Console) resume(w http.ResponseWriter, r *http.Request)         { c.pauseWrite(w, r, "resume") }

// pauseWrite pauses or resumes the event type the form names.
func (c *Console) pauseWrite(w http.ResponseWriter, r *http.Request, action string) {
	r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
	if err := r.ParseForm(); err != nil {
		c.refuse(w, r, action, http.StatusBadRequest, "unreadable form: "+err.Error())
		return
	}
	if status, reason := c.checkWrite(r); status != 0 {
		c.refuse(w, r, action, status, reason)
		return
	}
	t, err := c.types.eventType(r.PostForm)
	if err != nil {
		c.refuse(w, r, action, http.StatusBadRequest, err.Error())
		return
	}
	if t == "" || len(t) > maxPauseType || !utf8.ValidString(t) {
		c.refuse(w, r, action, http.StatusBadRequest,
			fmt.Sprintf("name the event type to %s: valid UTF-8 of 1 to %d bytes", action, maxPauseType))
		return
	}
	var o outbox.PauseOptions
	if action == "pause" {
		o.Reason = strings.TrimSpace(r.PostFormValue("reason"))
		if len(o.Reason) > maxPauseReason || !utf8.ValidString(o.Reason) {
			c.refuse(w, r, action, http.StatusBadRequest, fmt.Sprintf("the reason must be valid UTF-8 of at most %d bytes", maxPauseReason))
			return
		}
		if s := strings.TrimSpace(r.PostFormValue("for")); s != "" {
			if o.For, err = parsePauseFor(s); err != nil {
				c.refuse(w, r, action, http.StatusBadRequest, err.Error())
				return
			}
		}
	}
	ctx, cancel := c.ctx(r)
	defer cancel()
	if action == "pause" {
		err = outbox.Pause(ctx, c.db, t, o)
	} else {
		err = outbox.Resume(ctx, c.db, t)
	}
	log := c.cfg.logger.With("remote_addr", r.RemoteAddr, "action", action, "event_type", c.clean(t))
	if action == "pause" {
		log = log.With("for", o.For.String(), "reason", c.clean(o.Reason))
	}
	if err != nil {
		log.Error("console write failed", "err", c.errText(err))
		c.fail(w, r, http.StatusServiceUnavailable, fmt.Sprintf("The %s failed: %s", action, c.errText(err)))
		return
	}
	log.Info("console write")
	seeOther(w, "./?"+url.Values{action + "d": {c.types.seal(t)}}.Encode())
}

// parsePauseFor reads a pause's duration: Go's syntax (90m, 1h30m) or a whole number of days
// (1d, 7d), which an on-call person types more readily than 168h.
func parsePauseFor(s string) (time.Duration, error) {
	bad := fmt.Errorf("%q is not a duration: say 15m, 2h or 1d, or leave it empty to pause until Resume", s)
	var d time.Duration
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseInt(days, 10, 64)
		if err != nil || n <= 0 || n > int64(maxPauseFor/(24*time.Hour)) {
			return 0, bad
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, bad
		}
	}
	if d <= 0 || d > maxPauseFor {
		return 0, fmt.Errorf("the pause must last more than 0 and at most %d days, got %q", maxPauseFor/(24*time.Hour), s)
	}
	return d, nil
}

// controlConfirm fills the confirmation page of a cancel or a run now; what names the
// selected ids ("message 7", "3 selected message(s)").
func (c *Console) controlConfirm(d *confirmData, action string, sel selection, what string, n int64) {
	if action == "cancel" {
		switch {
		case len(sel.ids) > 0:
			d.Heading = "Cancel " + what + "?"
			d.DryRun = fmt.Sprintf("Dry run: %d of the %d given message(s) are PENDING or running and would be cancelled.", n, len(sel.ids))
		default:
			d.Heading = "Cancel every PENDING message of " + d.Type + "?"
			d.DryRun = fmt.Sprintf("Dry run: %d PENDING or running message(s) of this type would be cancelled.", n)
		}
		if n == 0 {
			d.DryRun = "Nothing to cancel: no PENDING or running message matches (any more)."
		}
		d.Effect = "They become CANCELLED: never delivered, never retried, kept until purged " +
			"(outboxgen purge --status cancelled). A message running now finishes its attempt: if it fails it " +
			"becomes CANCELLED, if it succeeds it stays SENT. A cancelled ordered message leaves its key, so the " +
			"key's next message goes on. This cannot be undone."
		d.Button = fmt.Sprintf("Cancel %d message(s)", n)
		return
	}
	switch {
	case len(sel.ids) > 0:
		d.Heading = "Run " + what + " now?"
		d.DryRun = fmt.Sprintf("Dry run: %d of the %d given message(s) are PENDING and wait for a backoff or a delay; they would become due now.", n, len(sel.ids))
	default:
		d.Heading = "Run every waiting PENDING message of " + d.Type + " now?"
		d.DryRun = fmt.Sprintf("Dry run: %d PENDING message(s) of this type wait for a backoff or a delay; they would become due now.", n)
	}
	if n == 0 {
		d.DryRun = "Nothing to run now: no selected message waits (it is due already, running, or done)."
	}
	d.Effect = "They become due now, on the database clock, with their attempts as they are: the attempt " +
		"budget still holds. An ordered message still waits for its key's head, and a paused type's " +
		"messages wait for Resume."
	d.Button = fmt.Sprintf("Run %d message(s) now", n)
}

// controlNotice is the overview's line after a pause or a resume; the type comes back as its
// reference, so a crafted link cannot make the console announce a pause that never happened.
func (c *Console) controlNotice(q url.Values) string {
	for _, k := range []string{"paused", "resumed"} {
		if ref := q.Get(k); ref != "" {
			t, err := c.types.open(ref)
			if err != nil {
				return ""
			}
			if k == "paused" {
				return "Paused " + c.clean(t) + ": workers stop claiming it within a second."
			}
			return "Resumed " + c.clean(t) + ": workers claim it again within a second."
		}
	}
	return notice(q)
}
