// outboxgen status: the outbox's state by event type (outbox.Stats), the newest FAILED
// messages, and --check for cron jobs and probes.

package cli

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/outboxgen/outboxgen/internal/health"
	"github.com/outboxgen/outboxgen/internal/termesc"
	"github.com/outboxgen/outboxgen/runtime/outbox"
)

const statusHelp = `usage: outboxgen status [--json] [--check] [--window 1h] [--max-due-age 10m] [--max-held-age 10m] [--failed 10] [--dsn DSN]

Prints the outbox's state from the database (outbox.Stats): by event type the PENDING, due,
PROCESSING, stale, stuck, FAILED and held-key counts (never SENT: that part of the table grows
without bound), the oldest pending message's age, the held ordering keys, and the newest FAILED
messages with their last_error.

  due      PENDING and next_attempt_at has passed: waiting only for a worker
  stale    PROCESSING past its lease (reclaim_after): its worker died or hung; a live worker
           will reclaim it
  stuck    PROCESSING past 3x its lease: nobody is reclaiming; no worker is alive for it
  oldest pending   the oldest PENDING message's age, delayed and backed-off ones included
  oldest due       how long the longest-waiting due message has been claimable: near the
                   workers' poll interval while they run; it grows when nobody claims
  held keys        ordering keys whose head message cannot be handled now (FAILED, or
                   waiting for a retry or a Delay) while others of the key wait behind it;
                   a FAILED head holds its key until retry or purge; the HELD column
                   counts each under its head message's type (a key's group can span
                   several event types)
  broken keys      ordering keys that cannot move because a row was changed by hand: a
                   head entry whose message is missing, SENT or not the entry's, or an
                   ordered PENDING message without its entry; a running worker repairs
                   them within its reclaim interval

--check exits 1 when stuck > 0, when a due message has waited longer than --max-due-age (no
worker is claiming: every worker is down, or none handles that event type), or when any message
FAILED within --window, or when an ordering key has been held longer than --max-held-age, or when any ordering key is
broken, so a
cron job or probe alerts on an outage and on new failures without staying red forever over old
ones.
`

func runStatus(args []string, stdout, stderr io.Writer) int {
	c := newOpsCmd("status", statusHelp, stdout, stderr)
	asJSON := c.fs.Bool("json", false, "print JSON (the shape is documented in docs/operations.md)")
	check := c.fs.Bool("check", false, "exit 1 when stuck > 0 or messages FAILED within --window")
	window := durationFlag{d: time.Hour}
	c.fs.Var(&window, "window", "how far back a FAILED message fails --check (Go syntax or days)")
	maxDue := durationFlag{d: 10 * time.Minute}
	c.fs.Var(&maxDue, "max-due-age", "a due message waiting longer than this fails --check (0: never)")
	maxHeld := durationFlag{d: 10 * time.Minute}
	c.fs.Var(&maxHeld, "max-held-age", "an ordering key held longer than this fails --check (0: never)")
	nFailed := c.fs.Int("failed", 10, "how many of the newest FAILED messages to list (0: none)")
	if code, ok := c.parse(args); !ok {
		return code
	}
	if window.d <= 0 {
		return c.usageErr("--window must be positive, got %s", window.String())
	}
	if maxDue.d < 0 {
		return c.usageErr("--max-due-age must not be negative, got %s", maxDue.String())
	}
	if maxHeld.d < 0 {
		return c.usageErr("--max-held-age must not be negative, got %s", maxHeld.String())
	}
	if *nFailed < 0 {
		return c.usageErr("--failed must be >= 0, got %d", *nFailed)
	}
	ctx, stop := opsContext()
	defer stop()
	db, code, ok := c.open(ctx)
	if !ok {
		return code
	}
	return c.closeDB(db, c.status(ctx, db, *asJSON, *check, statusLimits{window: window.d, maxDue: maxDue.d, maxHeld: maxHeld.d}, *nFailed))
}

// statusReport is the JSON shape of `outboxgen status --json`, documented in docs/operations.md.
type statusReport struct {
	Pending              int64                 `json:"pending"`
	Due                  int64                 `json:"due"`
	Processing           int64                 `json:"processing"`
	Stale                int64                 `json:"stale"`
	Stuck                int64                 `json:"stuck"`
	Failed               int64                 `json:"failed"`
	Cancelled            int64                 `json:"cancelled"`
	OldestPendingSeconds float64               `json:"oldest_pending_seconds"`
	OldestDueSeconds     float64               `json:"oldest_due_seconds"`
	ByType               map[string]typeReport `json:"by_type"`
	HeldKeys             int64                 `json:"held_keys"`
	OldestHeldSeconds    float64               `json:"oldest_held_seconds"`
	Held                 []heldReport          `json:"held"`
	BrokenKeys           int64                 `json:"broken_keys"`
	Broken               []brokenReport        `json:"broken"`
	NewestFailed         []failedReport        `json:"newest_failed"`
	Paused               []pauseReport         `json:"paused"`
	Check                checkReport           `json:"check"`
	// OldestSentSeconds is the age of the oldest SENT row kept (outbox.OldestSent); 0 when none.
	OldestSentSeconds float64 `json:"oldest_sent_seconds"`
	// Purge is the oldest open transaction and InnoDB's history list length.
	Purge purgeReport `json:"purge"`
}

// pauseReport is one event type paused with outboxgen pause.
type pauseReport struct {
	EventType string    `json:"event_type"`
	Reason    string    `json:"reason"`
	Since     time.Time `json:"since"`
	// LeftSeconds is the time until the pause ends by itself; 0 for a pause until resume.
	LeftSeconds float64 `json:"left_seconds"`
}

type typeReport struct {
	Pending    int64 `json:"pending"`
	Due        int64 `json:"due"`
	Processing int64 `json:"processing"`
	Stale      int64 `json:"stale"`
	Stuck      int64 `json:"stuck"`
	Failed     int64 `json:"failed"`
	Cancelled  int64 `json:"cancelled"`
	// Held is how many held ordering keys have a head message of this type.
	Held int64 `json:"held"`
	// OldestPendingSeconds is this type's oldest PENDING row's age; 0 when none.
	OldestPendingSeconds float64 `json:"oldest_pending_seconds"`
	// OldestDueSeconds is how long this type's longest-waiting due row has been due; 0 when none.
	OldestDueSeconds float64 `json:"oldest_due_seconds"`
	// Retrying counts PENDING rows that failed and wait for a retry. Failing says the type's
	// handlers keep failing: 5 or more retrying and none sent within 30s (outbox.TypeCounts).
	Retrying int64 `json:"retrying"`
	Failing  bool  `json:"failing"`
}

// heldReport is one held ordering key.
type heldReport struct {
	OrderingKey   string  `json:"ordering_key"`
	HeadID        int64   `json:"head_id"`
	HeadEventType string  `json:"head_event_type"`
	HeadStatus    string  `json:"head_status"`
	Waiting       int64   `json:"waiting"`
	HeldSeconds   float64 `json:"held_seconds"`
}

// brokenReport is one broken ordering key (outbox.BrokenKey).
type brokenReport struct {
	OrderingKey string `json:"ordering_key"`
	Seq         int64  `json:"seq"`
	MessageID   int64  `json:"message_id"`
	EventType   string `json:"event_type"`
	Status      string `json:"status"`
	Reason      string `json:"reason"`
}

type failedReport struct {
	ID          int64     `json:"id"`
	EventType   string    `json:"event_type"`
	Attempts    int       `json:"attempts"`
	MaxAttempts int       `json:"max_attempts"`
	FailedAt    time.Time `json:"failed_at"`
	LastError   string    `json:"last_error"`
}

type checkReport struct {
	OK               bool     `json:"ok"`
	WindowSeconds    float64  `json:"window_seconds"`
	MaxDueAgeSeconds float64  `json:"max_due_age_seconds"`
	MaxHeldSeconds   float64  `json:"max_held_age_seconds"`
	FailedInWindow   int64    `json:"failed_in_window"`
	Problems         []string `json:"problems"`
}

// statusLimits are what --check holds the outbox to.
type statusLimits struct {
	window time.Duration // a FAILED message within it fails the check
	maxDue time.Duration // a due message waiting longer fails the check; 0: never
	// maxHeld: an ordering key held longer fails the check; 0: never
	maxHeld time.Duration
}

func (c *opsCmd) status(ctx context.Context, db *sql.DB, asJSON, check bool, lim statusLimits, nFailed int) int {
	window := lim.window
	snap, err := outbox.Stats(ctx, db)
	if err != nil {
		return c.dbErr("stats", err)
	}
	rep := statusReport{
		Pending: snap.Pending, Due: snap.Due, Processing: snap.Processing,
		Stale: snap.Stale, Stuck: snap.Stuck, Failed: snap.Failed, Cancelled: snap.Cancelled,
		OldestPendingSeconds: snap.OldestPending.Seconds(),
		OldestDueSeconds:     snap.OldestDue.Seconds(),
		ByType:               map[string]typeReport{},
		HeldKeys:             snap.HeldKeys,
		OldestHeldSeconds:    snap.OldestHeld.Seconds(),
		Held:                 []heldReport{},
		BrokenKeys:           snap.BrokenKeys,
		Broken:               []brokenReport{},
		NewestFailed:         []failedReport{},
		Paused:               []pauseReport{},
		Check: checkReport{WindowSeconds: window.Seconds(), MaxDueAgeSeconds: lim.maxDue.Seconds(),
			MaxHeldSeconds: lim.maxHeld.Seconds(), Problems: []string{}},
	}
	oldestSent, anySent, err := outbox.OldestSent(ctx, db)
	if err != nil {
		return c.dbErr("oldest sent", err)
	}
	if anySent {
		rep.OldestSentSeconds = oldestSent.Seconds()
	}
	if rep.Purge, err = c.readPurge(ctx, db); err != nil {
		return c.dbErr("read purge lag", err)
	}
	for _, h := range snap.Held {
		rep.Held = append(rep.Held, heldReport{OrderingKey: c.jsonString(h.OrderingKey), HeadID: int64(h.Head),
			HeadEventType: c.jsonString(h.HeadEventType), HeadStatus: string(h.HeadStatus), Waiting: h.Waiting, HeldSeconds: h.For.Seconds()})
	}
	for _, b := range snap.Broken {
		rep.Broken = append(rep.Broken, brokenReport{OrderingKey: c.clean(b.OrderingKey), Seq: b.Seq, MessageID: int64(b.Message),
			EventType: c.clean(b.EventType), Status: string(b.Status), Reason: string(b.Reason)})
	}
	for t, tc := range snap.ByType {
		// Two types that escape alike (one not UTF-8, one spelling its escape out) share a key,
		// as in outboxprom: their counts are added, so none is lost.
		rep.ByType[c.jsonString(t)] = rep.ByType[c.jsonString(t)].add(typeReport{Pending: tc.Pending, Due: tc.Due, Processing: tc.Processing,
			Stale: tc.Stale, Stuck: tc.Stuck, Failed: tc.Failed, Cancelled: tc.Cancelled, Held: tc.Held, OldestPendingSeconds: tc.OldestPending.Seconds(),
			OldestDueSeconds: tc.OldestDue.Seconds(), Retrying: tc.Retrying, Failing: tc.Failing})
	}
	paused, err := outbox.Pauses(ctx, db)
	if err != nil {
		return c.dbErr("read pauses", err)
	}
	for _, p := range paused {
		rep.Paused = append(rep.Paused, pauseReport{EventType: c.jsonString(p.EventType), Reason: c.jsonString(p.Reason),
			Since: p.Since, LeftSeconds: p.Left.Seconds()})
	}
	if nFailed > 0 && snap.Failed > 0 {
		failed, err := newestFailed(ctx, db, nFailed)
		if err != nil {
			return c.dbErr("list failed", err)
		}
		for _, f := range failed {
			rep.NewestFailed = append(rep.NewestFailed, failedReport{
				ID: int64(f.ID), EventType: c.jsonString(f.EventType), Attempts: f.Attempts, MaxAttempts: f.MaxAttempts,
				FailedAt: f.FailedAt, LastError: opsTruncate(c.jsonString(f.LastError), lastErrorWidth),
			})
		}
	}
	// The window ends now on the database clock, which wrote failed_at: this machine's clock,
	// hours off, would count a failure a minute old as outside it.
	if snap.Failed > 0 {
		recent, err := countFailed(ctx, db, outbox.Filter{FailedWithin: window})
		if err != nil {
			return c.dbErr("count recent failures", err)
		}
		rep.Check.FailedInWindow = recent
	}
	pausedTypes := map[string]bool{}
	for _, p := range paused {
		pausedTypes[p.EventType] = true
	}
	for _, p := range health.Problems(snap, health.Limits{MaxDueAge: lim.maxDue, MaxHeldAge: lim.maxHeld, Window: window, Paused: pausedTypes},
		rep.Check.FailedInWindow, c.line) {
		if p.Level != "info" { // informational lines (stale rows a live worker reclaims) do not fail the check
			rep.Check.Problems = append(rep.Check.Problems, p.Text)
		}
	}
	rep.Check.OK = len(rep.Check.Problems) == 0

	if asJSON {
		out, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			fmt.Fprintf(c.errw, "outboxgen status: writing JSON: %s\n", c.line(err.Error()))
			return opsExitDB
		}
		c.out.Write(append(termesc.JSON(out), '\n'))
	} else {
		c.printStatus(rep, window)
	}
	if check && !rep.Check.OK {
		return opsExitCheck
	}
	return opsExitOK
}

func (c *opsCmd) printStatus(rep statusReport, window time.Duration) {
	// Built whole, then written once.
	var b bytes.Buffer
	defer func() { c.out.Write(b.Bytes()) }() // one write: a reader never sees half a table
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "EVENT TYPE\tPENDING\tDUE\tPROCESSING\tSTALE\tSTUCK\tFAILED\tHELD\tOLDEST PENDING\tOLDEST DUE")
	types := make([]string, 0, len(rep.ByType))
	for t := range rep.ByType {
		types = append(types, t)
	}
	sort.Strings(types)
	for _, t := range types {
		tc := rep.ByType[t]
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\n", termesc.Line(t), tc.Pending, tc.Due, tc.Processing, tc.Stale, tc.Stuck, tc.Failed, tc.Held,
			pendingAge(tc.Pending, tc.OldestPendingSeconds), pendingAge(tc.Due, tc.OldestDueSeconds))
	}
	fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\n", "total", rep.Pending, rep.Due, rep.Processing, rep.Stale, rep.Stuck, rep.Failed, rep.HeldKeys,
		pendingAge(rep.Pending, rep.OldestPendingSeconds), pendingAge(rep.Due, rep.OldestDueSeconds))
	w.Flush()

	fmt.Fprintln(&b)
	fmt.Fprintf(&b, "%-17s%s (delivery lag, delayed and backed-off messages included)\n", "oldest pending:", pendingAge(rep.Pending, rep.OldestPendingSeconds))
	fmt.Fprintf(&b, "%-17s%s (how long a due message has waited for a worker)\n", "oldest due:", pendingAge(rep.Due, rep.OldestDueSeconds))
	fmt.Fprintf(&b, "%-17s%d (PROCESSING past their lease; a live worker reclaims them)\n", "stale:", rep.Stale)
	if rep.Stuck > 0 {
		fmt.Fprintf(&b, "%-17s%d (PROCESSING past 3x their lease: NOBODY IS RECLAIMING)\n", "stuck:", rep.Stuck)
	} else {
		fmt.Fprintf(&b, "%-17s0\n", "stuck:")
	}
	fmt.Fprintf(&b, "%-17s%d\n", "failed in "+formatAge(window)+":", rep.Check.FailedInWindow)
	fmt.Fprintf(&b, "%-17s%d\n", "held keys:", rep.HeldKeys)
	fmt.Fprintf(&b, "%-17s%s (retention: workers delete SENT rows after Config.Retention.Sent, 24h by default)\n", "oldest sent:", sentAge(rep.OldestSentSeconds))
	b.WriteString(purgeLine(rep.Purge))
	if rep.Cancelled > 0 {
		fmt.Fprintf(&b, "%-17s%d (never delivered; `outboxgen purge --status cancelled` deletes them)\n", "cancelled:", rep.Cancelled)
	}
	if len(rep.Paused) > 0 {
		fmt.Fprintf(&b, "\npaused event types (not claimed by any worker; `outboxgen resume TYPE`):\n")
		w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(w, "  EVENT TYPE\tSINCE\tENDS IN\tREASON")
		for _, p := range rep.Paused {
			ends := "at resume"
			if p.LeftSeconds > 0 {
				ends = formatAge(secondsAge(p.LeftSeconds))
			}
			fmt.Fprintf(w, "  %s\t%s\t%s\t%s\n", termesc.Line(p.EventType), formatTime(p.Since), ends, dashIfEmpty(termesc.Line(opsOneLine(p.Reason))))
		}
		w.Flush()
	}
	if rep.BrokenKeys > 0 {
		fmt.Fprintf(&b, "%-17s%d (a row was changed by hand: THE KEY CANNOT MOVE until a worker repairs it)\n", "broken keys:", rep.BrokenKeys)
	}

	if len(rep.Held) > 0 {
		fmt.Fprintf(&b, "\nheld ordering keys (%d of %d, longest held first; `outboxgen retry --id HEAD` or purge the head to release a key):\n", len(rep.Held), rep.HeldKeys)
		w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(w, "  ORDERING KEY\tHEAD\tHEAD TYPE\tHEAD STATUS\tWAITING\tHELD FOR")
		for _, h := range rep.Held {
			fmt.Fprintf(w, "  %s\t%d\t%s\t%s\t%d\t%s\n", termesc.Line(opsTruncate(h.OrderingKey, 80)), h.HeadID, termesc.Line(h.HeadEventType), h.HeadStatus, h.Waiting,
				formatAge(secondsAge(h.HeldSeconds)))
		}
		w.Flush()
	}

	if len(rep.Broken) > 0 {
		fmt.Fprintf(&b, "\nbroken ordering keys (%d entries for %d keys; a running worker's maintenance repairs them):\n", len(rep.Broken), rep.BrokenKeys)
		w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(w, "  ORDERING KEY\tSEQ\tMESSAGE\tTYPE\tSTATUS\tREASON")
		for _, k := range rep.Broken {
			fmt.Fprintf(w, "  %s\t%d\t%d\t%s\t%s\t%s\n", termesc.Line(opsTruncate(k.OrderingKey, 80)), k.Seq, k.MessageID,
				dashIfEmpty(termesc.Line(k.EventType)), dashIfEmpty(k.Status), k.Reason)
		}
		w.Flush()
	}

	if len(rep.NewestFailed) > 0 {
		fmt.Fprintf(&b, "\nnewest FAILED (%d of %d; retry with `outboxgen retry --id N`):\n", len(rep.NewestFailed), rep.Failed)
		w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(w, "  ID\tEVENT TYPE\tATTEMPTS\tFAILED AT\tLAST ERROR")
		for _, f := range rep.NewestFailed {
			fmt.Fprintf(w, "  %d\t%s\t%d/%d\t%s\t%s\n", f.ID, termesc.Line(f.EventType), f.Attempts, f.MaxAttempts,
				formatTime(f.FailedAt), termesc.Line(opsOneLine(f.LastError)))
		}
		w.Flush()
	}
	if rep.Check.OK {
		fmt.Fprintln(&b, "\ncheck: ok")
	} else {
		fmt.Fprintf(&b, "\ncheck: FAILING: %s\n", strings.Join(rep.Check.Problems, "; "))
	}
}

// dashIfEmpty shows an absent value (a broken key's missing message has no type or status).
func dashIfEmpty(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// sentAge is the oldest SENT row's age, or "-" when none is kept.
func sentAge(seconds float64) string {
	if seconds <= 0 {
		return "-"
	}
	return formatAge(secondsAge(seconds))
}

func pendingAge(pending int64, seconds float64) string {
	if pending == 0 {
		return "-"
	}
	return formatAge(secondsAge(seconds))
}

// add is the sum of two types' counts that share a key in the report; ages are the larger.
func (a typeReport) add(b typeReport) typeReport {
	return typeReport{Pending: a.Pending + b.Pending, Due: a.Due + b.Due, Processing: a.Processing + b.Processing,
		Stale: a.Stale + b.Stale, Stuck: a.Stuck + b.Stuck, Failed: a.Failed + b.Failed, Cancelled: a.Cancelled + b.Cancelled, Held: a.Held + b.Held,
		OldestPendingSeconds: max(a.OldestPendingSeconds, b.OldestPendingSeconds),
		OldestDueSeconds:     max(a.OldestDueSeconds, b.OldestDueSeconds),
		Retrying:             a.Retrying + b.Retrying, Failing: a.Failing || b.Failing}
}

// countFailed counts the FAILED rows matching f. outbox.Retry's dry run is the runtime's
// count of exactly that; DryRun is forced here so this can never move a row.
func countFailed(ctx context.Context, db outbox.DBTX, f outbox.Filter) (int64, error) {
	f.DryRun = true
	return outbox.Retry(ctx, db, f)
}

// newestFailed returns up to n of the most recently FAILED messages, newest first: one
// ListFailed, which reads the FAILED rows through the claim index's status prefix and keeps the
// newest n (a top-n sort: its cost grows with the FAILED rows that Purge has not yet removed).
func newestFailed(ctx context.Context, db outbox.DBTX, n int) ([]outbox.FailedMessage, error) {
	return outbox.ListFailed(ctx, db, outbox.Filter{Newest: true}, n)
}
