// Package incident is the one reporting channel shared by runtime/outbox and runtime/mysqllock.
//
// # The model
//
// Most failures are returned as errors to the caller who can act on them. An incident is the
// other kind: something a person must look at, found on a path where no caller is waiting for an
// answer or where returning an error would hide a more important one:
//
//   - a named lock lost while its job ran ([LockLost]): another instance may have run the job
//     at the same time, so the data needs checking;
//   - a cleanup step that failed ([ReleaseFailed], [ReturnFailed], [DestroyFailed]): the
//     connection was destroyed to free the lock, or, if even that failed, a lock or pool slot
//     may be leaked;
//   - a lock that could not be taken for a reason other than "held elsewhere" ([AcquireFailed]):
//     the job did not run, and that is not the ordinary skip;
//   - outbox rows PROCESSING for more than three times their lease ([Stuck]): nobody is
//     reclaiming them;
//   - a handler that outlived its deadline and ignores its context ([HandlerHung]).
//
// Cleanup never hides the critical section's own error and never swallows its own: it
// recovers (destroys the connection), then reports here. Everything goes through one
// [Reporter], so incidents from locks and from the outbox read the same and reach the same
// place. The default, [Slog], writes one error-level line per incident; adapt a pager or an
// error tracker with [Func].
//
// A Reporter is called from cleanup paths, possibly with a cancelled context and from several
// goroutines at once: it must be safe for concurrent use, must not block for long, and must
// not depend on the context still being live.
package incident
