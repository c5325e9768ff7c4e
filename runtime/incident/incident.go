package incident

import (
	"context"
	"log/slog"
)

// Kind names what happened.
type Kind string

const (
	// LockLost: RELEASE_LOCK did not return 1, or the watchdog saw another session (or none)
	// holding the lock while the job ran. Another instance may have run concurrently: check data.
	LockLost Kind = "lock_lost"
	// ReleaseFailed: the RELEASE_LOCK query itself failed; the connection was destroyed to end
	// the session and free the lock.
	ReleaseFailed Kind = "release_failed"
	// ReturnFailed: giving the lock's connection back to the pool failed; it was destroyed.
	ReturnFailed Kind = "return_failed"
	// DestroyFailed: destroying a connection failed; the lock or pool slot may be leaked.
	DestroyFailed Kind = "destroy_failed"
	// AcquireFailed: GET_LOCK returned NULL or errored: the job did NOT run, and this is not
	// the ordinary "held elsewhere" skip.
	AcquireFailed Kind = "acquire_failed"
	// Stuck: rows PROCESSING for more than 3x their lease: nobody is reclaiming them.
	Stuck Kind = "stuck"
	// HandlerHung: a handler outlived its timeout and ignores its context; it keeps its slot.
	HandlerHung Kind = "handler_hung"
	// JobPanicked: a mysqllock Job's Run panicked. It was recovered and the run counts as
	// failed (not recorded in the run ledger; the lock released; the next tick runs). Subject
	// is the job's Name; Err carries the panic value and the stack.
	JobPanicked Kind = "job_panicked"
	// JobNotRecorded: a mysqllock Job ran with OncePerPeriod, but its run could not be written
	// to the run ledger, so another instance may run the same period again. Subject is the
	// job's Name; Err is the cause.
	JobNotRecorded Kind = "job_not_recorded"
	// SchemaTooNew: an outbox table's COMMENT says it needs a newer outboxgen than the worker's
	// (someone migrated to a schema this version may not run on). The worker stops claiming
	// until the table allows it again; deploy the newer outboxgen. Err names both versions.
	SchemaTooNew Kind = "schema_too_new"
)

// Incident is one report.
type Incident struct {
	Kind Kind
	// Subject is what it is about: a lock name, or a message id / event type.
	Subject string
	// ConnID is the server's CONNECTION_ID() of the session involved, 0 when unknown.
	ConnID int64
	// Err is the cause.
	Err error
}

// Reporter receives incidents. Implementations must be safe for concurrent use and must not
// block for long: they are called from cleanup paths.
type Reporter interface {
	Report(ctx context.Context, in Incident)
}

// Slog returns the default Reporter: one error-level line per incident on l
// (slog.Default() when l is nil).
func Slog(l *slog.Logger) Reporter { return slogReporter{l: l} }

type slogReporter struct{ l *slog.Logger }

func (r slogReporter) Report(ctx context.Context, in Incident) {
	l := r.l
	if l == nil {
		l = slog.Default()
	}
	attrs := []slog.Attr{slog.String("kind", string(in.Kind)), slog.String("subject", in.Subject)}
	if in.ConnID != 0 {
		attrs = append(attrs, slog.Int64("conn_id", in.ConnID))
	}
	if in.Err != nil {
		attrs = append(attrs, slog.String("error", in.Err.Error()))
	}
	// A cancelled ctx must not drop the report: slog handlers ignore ctx cancellation.
	l.LogAttrs(context.WithoutCancel(ctx), slog.LevelError, "outboxgen incident", attrs...)
}

// Func adapts a function to Reporter.
type Func func(ctx context.Context, in Incident)

// Report calls f.
func (f Func) Report(ctx context.Context, in Incident) { f(ctx, in) }
