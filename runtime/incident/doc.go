// Package incident is the one reporting channel shared by runtime/outbox and runtime/mysqllock.
//
// # The model
//
// Most failures are returned as errors to the caller who can act on them. An incident is the
// other kind. It is something a person must look at, found on a path where no caller is
// waiting for an answer. It may also be found where returning an error would hide a more
// important one.
//
//   - [LockLost] is a named lock lost while its job ran. Another instance may have run the job
//     at the same time, so the data needs checking.
//   - [ReleaseFailed], [ReturnFailed] and [DestroyFailed] are cleanup steps that failed. The
//     connection was destroyed to free the lock. If even that failed, a lock or pool slot may
//     be leaked.
//   - [AcquireFailed] is a lock that could not be taken for a reason other than being held
//     elsewhere. The job did not run, and that is not the ordinary skip.
//   - [Stuck] is outbox rows PROCESSING for more than three times their lease. Nobody is
//     reclaiming them.
//   - [HandlerHung] is a handler that outlived its deadline and ignores its context.
//
// Cleanup never hides the critical section's own error and never swallows its own. It
// recovers by destroying the connection, then reports here. Everything goes through one
// [Reporter], so incidents from locks and from the outbox read the same and reach the same
// place. The default, [Slog], writes one error-level line per incident. [Func] adapts a pager
// or an error tracker.
//
// A Reporter is called from cleanup paths, possibly with a cancelled context and from several
// goroutines at once. It must be safe for concurrent use and must not block for long. It must
// not depend on the context still being live.
package incident
