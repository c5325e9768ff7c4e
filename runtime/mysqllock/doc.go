// Package mysqllock runs a critical section under a MySQL/MariaDB named lock, taken with
// GET_LOCK. It keeps the cleanup discipline that stops a lock from outliving its job. It also
// runs scheduled jobs that must not run twice.
//
// # Named locks
//
// A named lock belongs to a server session, not to a transaction. COMMIT and ROLLBACK keep it.
// Giving the connection back to a database/sql pool keeps it too, because the pool keeps the
// socket and the session alive. A lock whose release failed, on a connection that went back to
// the pool, is thus held forever by an idle connection. The next GET_LOCK(name, 0) returns 0.
// The job concludes that another instance is running and skips, every time. The result is a
// dead cron that logs one warn line a day. Locker therefore keeps these rules.
//
//   - It takes every lock on its own pinned *sql.Conn and releases it on that same connection.
//   - It acts on exactly 1 from GET_LOCK. 0 means held elsewhere, with ran=false and a nil
//     error. NULL or a failed query is an error that is returned and reported, never a silent
//     skip.
//   - It releases on a context the caller's cancellation cannot kill, with its own timeout.
//   - It destroys the connection, which ends the session and frees the lock, in three cases.
//     Those are a failed RELEASE_LOCK, a failed return of the connection, and a lock that
//     turned out to be lost.
//   - It reports each of those through one incident.Reporter, with the lock name, the session's
//     CONNECTION_ID() and the cause. The incidents are lock lost, release failed, return
//     failed, destroy failed and acquire failed.
//   - It never hides the critical section's own error, which errors.Is finds.
//   - It watches the lock while the critical section runs. Every watchdog interval it checks
//     IS_USED_LOCK(name) = CONNECTION_ID() on the lock's own connection. WithWatchdog sets the
//     interval, 1s by default. The first check that finds the lock gone cancels the section's
//     context. context.Cause(ctx) then wraps ErrLockLost. "A lost lock" below describes the
//     window before that check.
//
// The server frees a destroyed session's locks when it processes the disconnect. That comes a
// moment after the client closed the socket, typically well under a millisecond, and longer on
// a loaded server. A TryDo in that instant may still see the lock held. The lock does not leak.
//
// RELEASE_LOCK returning anything but 1 means the lock was lost while the section ran. The
// session was killed, timed out or reconnected. Another instance may have run at the same time.
// It is therefore an error, ErrLockLost, for a person to check the data, not a warning.
//
// # A lost lock
//
// A lock is lost when its session ends or a statement on that session releases it. A session
// ends with KILL CONNECTION, wait_timeout, or a broken network the server notices. The server
// frees the lock at that instant, and another instance's GET_LOCK may take it at once. The
// watchdog learns of the loss only at its next check. That is up to one watchdog interval
// later, plus that check's round trip. A killed session fails the check at once. Until then
// the section's context is not cancelled. After that, the section stops only where it looks at
// its context, and a statement already sent completes. So for up to one interval two instances
// may run the section at once. The section's own statements run on other connections of the
// pool, since the lock's connection is not lent out. They do not die with the lock's session.
// These cover the window.
//
//   - The third layer below is the only complete cover. A row lock, a UNIQUE index or an
//     idempotency key makes the duplicate harmless.
//   - With Job.OncePerPeriod, the ledger's key holds the job and the period. The later of two
//     runs of a period fails to record and is reported as incident.LockLost. It tells a
//     person, and it does not prevent.
//   - Checking ctx before each write, or before each batch's commit, makes a section told to
//     stop write nothing more.
//   - A shorter interval, set with WithWatchdog, narrows the window. It costs one IS_USED_LOCK
//     query per interval for each lock held, on the lock's own connection.
//
// # Jobs that must not run twice: three layers
//
// Applications run two or more instances, and a rolling deploy overlaps old and new. A job
// scheduled for midnight thus starts on each of them. Three layers prevent different
// duplicates.
//
//	layer                          prevents                                      limit
//	in-process running flag        a tick starting while the previous one runs   one process only
//	named lock (GET_LOCK)          two instances running the job at the same time a lock never released stops the job forever (hence the cleanup above)
//	row lock / UNIQUE / idem. key  duplicated effects when both layers above      designed per resource
//	                               were bypassed
//
// Locker.RunJob combines the first two. With Job.OncePerPeriod it adds a run ledger,
// outbox_job_runs, keyed by the job and the period's start. A daily job thus runs once per day
// even when instances take turns. The instance that gets the lock second finds the period
// recorded and skips it. A panic in a job's Run is recovered and treated as a failed run. It is
// reported as an incident and not recorded, and the lock is released. The schedule goes on.
//
// Ask one question of any new batch job. If two instances run it at once, what is duplicated,
// and can the database prevent it? A row lock, a UNIQUE index or an idempotency key may make
// the duplicate harmless. Then use that and no job lock. The outbox worker does so, since its
// claim's row locks split the rows between instances, and it needs only the running flag. A
// yearly leave accrual or a billing run has no such key. Nor has creating a user with an email
// when soft deletes forbid a UNIQUE index. Such a job takes the named lock, and keeps the third
// layer wherever it is possible.
package mysqllock
