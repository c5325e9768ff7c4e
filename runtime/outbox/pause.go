// Pauses per event type, fleet-wide. A pause is a row in outbox_pauses, so every worker on the
// table sees it. A worker reads the active pauses at most every pauseRefreshEvery and leaves
// the paused types out of its claim. The claim's SQL stays as it is: only its list of types
// shrinks. The same-process hand-off honours the same set, so a paused type waits for a claim.

package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/outboxgen/outboxgen/runtime/internal/store"
)

// PauseOptions says how long a pause lasts and why.
type PauseOptions struct {
	// For, when positive, ends the pause that long after it starts, on the database clock.
	// Workers then claim the type again by themselves. Zero pauses until Resume. Negative is an
	// error.
	For time.Duration
	// Reason is shown to other operators by status and the console. At most 1000 bytes of
	// UTF-8. Defaults to none.
	Reason string
}

// maxPauseReason bounds PauseOptions.Reason.
const maxPauseReason = 1000

// Pause stops every worker on the table from claiming eventType, within about a second. Rows
// already claimed finish. A type with no messages can be paused, so a pause can precede the
// messages it holds. Pausing a paused type replaces its reason and end. Pause writes one row
// and never commits a caller's transaction. On a *sql.Tx the pause takes effect at commit.
func Pause(ctx context.Context, db DBTX, eventType string, o PauseOptions) error {
	if err := checkPauseType("Pause", eventType); err != nil {
		return err
	}
	if o.For < 0 {
		return fmt.Errorf("outbox: Pause %q: For must not be negative, got %s", eventType, o.For)
	}
	if len(o.Reason) > maxPauseReason || !utf8.ValidString(o.Reason) {
		return fmt.Errorf("outbox: Pause %q: Reason must be valid UTF-8 of at most %d bytes", eventType, maxPauseReason)
	}
	// An ended pause is a stale row. Dropping it here keeps the table to live pauses.
	if _, err := q.PauseDeleteEnded(ctx, sdb(db)); err != nil {
		return fmt.Errorf("outbox: Pause %q: %w", eventType, explain(err))
	}
	err := q.PauseSet(ctx, sdb(db), store.PauseSetParams{
		EventType: eventType,
		Reason:    sql.NullString{String: o.Reason, Valid: o.Reason != ""},
		ForUs:     max(o.For.Microseconds(), 0),
	})
	if err != nil {
		return fmt.Errorf("outbox: Pause %q: %w", eventType, explain(err))
	}
	return nil
}

// Resume ends a pause of eventType. Workers claim the type again within about a second.
// Resuming a type that is not paused does nothing and is no error.
func Resume(ctx context.Context, db DBTX, eventType string) error {
	if err := checkPauseType("Resume", eventType); err != nil {
		return err
	}
	if _, err := q.PauseDelete(ctx, sdb(db), eventType); err != nil {
		return fmt.Errorf("outbox: Resume %q: %w", eventType, explain(err))
	}
	return nil
}

// PausedType is one pause in force, as Pauses returns it.
type PausedType struct {
	EventType string
	Reason    string
	// Since is when the pause began, on the database clock, in UTC.
	Since time.Time
	// Until is when it ends by itself, or zero for a pause until Resume. Left is the time
	// until then, measured on the database clock.
	Until time.Time
	Left  time.Duration
}

// Pauses lists the pauses in force, by event type.
func Pauses(ctx context.Context, db DBTX) ([]PausedType, error) {
	rows, err := q.PauseList(ctx, sdb(db))
	if err != nil {
		return nil, fmt.Errorf("outbox: Pauses: %w", explain(err))
	}
	out := make([]PausedType, len(rows))
	for i, r := range rows {
		out[i] = PausedType{EventType: r.EventType, Reason: store.Text(r.Reason), Since: r.PausedAt, Until: r.PausedUntil.Time}
		if r.PausedUntil.Valid {
			out[i].Left = time.Duration(max(r.LeftUs, 0)) * time.Microsecond
		}
	}
	return out, nil
}

func checkPauseType(op, eventType string) error {
	if eventType == "" || len(eventType) > 191 || !utf8.ValidString(eventType) {
		return fmt.Errorf("outbox: %s %q: the event type must be valid UTF-8 of 1 to 191 bytes", op, eventType)
	}
	return nil
}

// pauseRefreshEvery is how old a worker's view of the pauses may grow before its next claim or
// hand-off reads it again. A pause thus takes effect within about this long, and an idle
// worker pays one small query per poll at most.
const pauseRefreshEvery = 500 * time.Millisecond

// pauseRefreshTimeout bounds one read of the pauses.
const pauseRefreshTimeout = 2 * time.Second

// pauseView is a worker's copy of the active pauses.
type pauseView struct {
	mu     sync.Mutex // held across a refresh, so concurrent callers share one query
	paused map[string]bool
	at     time.Time // local time of the last refresh, zero before the first
	failed bool      // the last refresh failed, so the next success is logged
}

// pausedSet returns the paused types, read again when the copy is older than
// pauseRefreshEvery. When the read fails the last known set stays. The claim's own errors
// show an outage, and a worker must not start claiming a paused type because a read failed.
func (w *Worker) pausedSet(ctx context.Context) map[string]bool {
	p := &w.pauses
	p.mu.Lock()
	defer p.mu.Unlock()
	now := w.clock.Now()
	if !p.at.IsZero() && now.Sub(p.at) < pauseRefreshEvery && now.Sub(p.at) >= 0 {
		return p.paused
	}
	p.at = now
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pauseRefreshTimeout)
	defer cancel()
	types, err := q.PauseActiveTypes(ctx, w.db)
	if err != nil {
		if !p.failed && !errors.Is(err, context.Canceled) {
			w.log.LogAttrs(ctx, slog.LevelWarn, "outbox pauses not read; the last known ones hold",
				slog.String("error", explain(err).Error()))
		}
		p.failed = true
		return p.paused
	}
	p.failed = false
	next := make(map[string]bool, len(types))
	for _, t := range types {
		if _, ours := w.router.lookup(t); ours {
			next[t] = true
		}
	}
	for t := range next {
		if !p.paused[t] {
			w.log.LogAttrs(ctx, slog.LevelInfo, "outbox event type paused", slog.String("event_type", t))
		}
	}
	for t := range p.paused {
		if !next[t] {
			w.log.LogAttrs(ctx, slog.LevelInfo, "outbox event type resumed", slog.String("event_type", t))
		}
	}
	p.paused = next
	w.testSignals.pausesRefreshed.Signal(len(next))
	return next
}

// claimTypes is the router's types less the paused ones, for one claim.
func (w *Worker) claimTypes(ctx context.Context) []string {
	paused := w.pausedSet(ctx)
	if len(paused) == 0 {
		return w.types
	}
	out := make([]string, 0, len(w.types))
	for _, t := range w.types {
		if !paused[t] {
			out = append(out, t)
		}
	}
	return out
}

// typePaused says whether eventType is paused, for the hand-off.
func (w *Worker) typePaused(eventType string) bool {
	return w.pausedSet(context.Background())[eventType]
}

// PausedTypes returns the event types of this worker's router that it does not claim now
// because they are paused, as of its last read of the pauses.
func (w *Worker) PausedTypes() []string {
	w.pauses.mu.Lock()
	defer w.pauses.mu.Unlock()
	out := make([]string, 0, len(w.pauses.paused))
	for _, t := range w.types {
		if w.pauses.paused[t] {
			out = append(out, t)
		}
	}
	return out
}
