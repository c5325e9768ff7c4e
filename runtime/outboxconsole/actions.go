package outboxconsole

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// The writes: retry (one message, the selected ones, or every FAILED message of a type), purge
// (FAILED messages by id), cancel and run now (PENDING messages by id or type, controls.go). A form posts the selection; the answer is a confirmation page
// with the dry run's count; only its Confirm button (confirm=1) changes rows. Every post passes
// checkWrite (writes allowed, same origin, CSRF token) and every write is logged.

// maxSelected caps the ids one post may carry: a page lists 50.
const maxSelected = 1000

type selection struct {
	ids       []outbox.MessageID
	eventType string
}

// parseSelection reads a write's form: ids, or an event type (by reference, or as plain text).
func (c *Console) parseSelection(form url.Values) (selection, error) {
	var s selection
	var err error
	if s.eventType, err = c.types.eventType(form); err != nil {
		return s, err
	}
	ids := form["id"]
	if len(ids) > maxSelected {
		return s, fmt.Errorf("%d ids selected; at most %d at a time", len(ids), maxSelected)
	}
	seen := map[int64]bool{}
	for _, v := range ids {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return s, fmt.Errorf("%q is not a message id", v)
		}
		if !seen[n] {
			seen[n] = true
			s.ids = append(s.ids, outbox.MessageID(n))
		}
	}
	return s, nil
}

// logIDs is the selection's ids for a log line.
func (s selection) logIDs() []int64 {
	out := make([]int64, len(s.ids))
	for i, id := range s.ids {
		out[i] = int64(id)
	}
	return out
}

type confirmData struct {
	Action  string // "retry", "purge", "cancel" or "runnow": where Confirm posts
	Danger  bool   // the write cannot be undone
	Heading string
	DryRun  string
	Effect  string
	Button  string
	Count   int64
	Type    string // as shown
	TypeRef string // the type's reference (typeref.go), posted back by Confirm
	IDs     []int64
	Back    string
}

func (c *Console) retry(w http.ResponseWriter, r *http.Request) { c.write(w, r, "retry") }
func (c *Console) purge(w http.ResponseWriter, r *http.Request) { c.write(w, r, "purge") }

func (c *Console) write(w http.ResponseWriter, r *http.Request, action string) {
	r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
	if err := r.ParseForm(); err != nil {
		c.refuse(w, r, action, http.StatusBadRequest, "unreadable form: "+err.Error())
		return
	}
	if status, reason := c.checkWrite(r); status != 0 {
		c.refuse(w, r, action, status, reason)
		return
	}
	sel, err := c.parseSelection(r.PostForm)
	if err != nil {
		c.refuse(w, r, action, http.StatusBadRequest, err.Error())
		return
	}
	switch {
	case action == "purge" && (len(sel.ids) == 0 || sel.eventType != ""):
		c.refuse(w, r, action, http.StatusBadRequest, "purge takes FAILED messages by id: select them first")
		return
	case action == "retry" && len(sel.ids) == 0 && sel.eventType == "":
		c.refuse(w, r, action, http.StatusBadRequest, "nothing selected: select messages, or retry every FAILED message of one event type")
		return
	case (action == "cancel" || action == "runnow") && len(sel.ids) == 0 && sel.eventType == "":
		c.refuse(w, r, action, http.StatusBadRequest, "nothing selected: name a message, or one event type")
		return
	}
	ctx, cancel := c.ctx(r)
	defer cancel()
	run := func(dry bool) (int64, error) {
		f := outbox.Filter{IDs: sel.ids, EventType: sel.eventType, DryRun: dry}
		switch action {
		case "purge":
			return outbox.Purge(ctx, c.db, outbox.PurgeFilter{Status: outbox.StatusFailed, IDs: sel.ids, DryRun: dry})
		case "cancel":
			return outbox.Cancel(ctx, c.db, f)
		case "runnow":
			return outbox.RetryPending(ctx, c.db, f)
		}
		return outbox.Retry(ctx, c.db, f)
	}

	if r.PostFormValue("confirm") != "1" {
		n, err := run(true)
		if err != nil {
			c.fail(w, r, http.StatusServiceUnavailable, "The dry run failed: "+c.errText(err))
			return
		}
		c.render(w, r, http.StatusOK, "confirm", c.confirmPage(action, sel, n))
		return
	}

	n, err := run(false)
	log := c.cfg.logger.With("remote_addr", r.RemoteAddr, "action", action, "ids", sel.logIDs(),
		"event_type", c.clean(sel.eventType), "count", n)
	if err != nil {
		log.Error("console write failed", "err", c.errText(err))
		c.fail(w, r, http.StatusServiceUnavailable, fmt.Sprintf("The %s stopped after %d message(s): %s", action, n, c.errText(err)))
		return
	}
	log.Info("console write")
	seeOther(w, c.afterWrite(action, sel, n))
}

// refuse logs a refused write and answers with the reason.
func (c *Console) refuse(w http.ResponseWriter, r *http.Request, action string, status int, reason string) {
	c.cfg.logger.Warn("console write refused", "remote_addr", r.RemoteAddr, "action", action, "status", status, "reason", reason)
	c.fail(w, r, status, reason)
}

func (c *Console) confirmPage(action string, sel selection, n int64) confirmData {
	d := confirmData{Action: action, Count: n, Type: c.clean(sel.eventType), Back: c.backURL(action, sel),
		Danger: action == "purge" || action == "cancel"}
	if sel.eventType != "" {
		d.TypeRef = c.types.seal(sel.eventType)
	}
	for _, id := range sel.ids {
		d.IDs = append(d.IDs, int64(id))
	}
	what := fmt.Sprintf("%d selected message(s)", len(sel.ids))
	if len(sel.ids) == 1 {
		what = fmt.Sprintf("message %d", sel.ids[0])
	}
	if action == "cancel" || action == "runnow" {
		c.controlConfirm(&d, action, sel, what, n)
		return d
	}
	if action == "purge" {
		d.Heading = "Purge " + what + "?"
		d.DryRun = fmt.Sprintf("Dry run: %d of the %d given message(s) are FAILED and would be deleted.", n, len(sel.ids))
		if n == 0 {
			d.DryRun = "Nothing to purge: none of the given messages is FAILED (any more)."
		}
		d.Effect = "They are deleted and will never be delivered. Read them first: this cannot be undone."
		d.Button = fmt.Sprintf("Purge %d message(s)", n)
		return d
	}
	switch {
	case len(sel.ids) > 0:
		d.Heading = "Retry " + what + "?"
		d.DryRun = fmt.Sprintf("Dry run: %d of the %d given message(s) are FAILED and would move.", n, len(sel.ids))
	default:
		d.Heading = "Retry every FAILED message of " + d.Type + "?"
		d.DryRun = fmt.Sprintf("Dry run: %d FAILED message(s) of this type would move.", n)
	}
	if n == 0 {
		d.DryRun = "Nothing to retry: no FAILED message matches (any more)."
	}
	d.Effect = "They go back to PENDING, due now, with a fresh attempt budget (attempts reset to 0; " +
		"last_error is kept). Fix the cause first. Delivery is at-least-once: a handler that did part of " +
		"the work before failing sees the message again."
	d.Button = fmt.Sprintf("Retry %d message(s)", n)
	return d
}

// backURL is where Cancel goes: the message, or the list the selection came from.
func (c *Console) backURL(action string, sel selection) string {
	if len(sel.ids) == 1 {
		return "message?id=" + strconv.FormatInt(int64(sel.ids[0]), 10)
	}
	if action == "cancel" || action == "runnow" {
		return "./"
	}
	if sel.eventType != "" {
		return c.failedURL(sel.eventType)
	}
	return "failed"
}

// afterWrite is where a confirmed write redirects: the message itself after a write to one (its
// page refreshes until a worker delivers it), else the list or the overview, with the count.
func (c *Console) afterWrite(action string, sel selection, n int64) string {
	key := map[string]string{"retry": "retried", "purge": "purged", "cancel": "cancelled", "runnow": "rannow"}[action]
	if action != "purge" && len(sel.ids) == 1 {
		return "message?" + url.Values{"id": {strconv.FormatInt(int64(sel.ids[0]), 10)}, key: {strconv.FormatInt(n, 10)}}.Encode()
	}
	v := url.Values{key: {strconv.FormatInt(n, 10)}}
	if action == "cancel" || action == "runnow" {
		return "./?" + v.Encode()
	}
	if sel.eventType != "" {
		c.typeQuery(v, sel.eventType)
	}
	return "failed?" + v.Encode()
}
