// Package mysqllock runs a critical section under a MySQL/MariaDB named lock (GET_LOCK), with the
// cleanup discipline that keeps a lock from outliving its job, and runs scheduled jobs that must
// not run twice.
//
// # Named locks
//
// A named lock belongs to a server session, not to a transaction: COMMIT and ROLLBACK keep it,
// and so does giving the connection back to a database/sql pool, because the pool keeps the
// socket (and the session) alive. A lock whose release failed and whose connection went back to
// the pool is held forever by an idle connection; the next GET_LOCK(name, 0) returns 0, the job
// concludes "another instance is running" and skips, every time: a dead cron that logs one warn
// line a day. So Locker:
//
//   - takes every lock on its own pinned *sql.Conn and releases it on that same connection;
//   - acts on exactly 1 from GET_LOCK; 0 is "held elsewhere" (ran=false, nil error); NULL or a
//     failed query is an error that is returned and reported, never a silent skip;
//   - releases on a context the caller's cancellation cannot kill, with its own timeout;
//   - destroys the connection (ending the session frees the lock) when RELEASE_LOCK fails, when
//     giving the connection back fails, and when the lock turned out to be lost;
//   - reports each of those through ONE incident.Reporter (lock lost, release failed, return
//     failed, destroy failed, acquire failed), with the lock name, the session's CONNECTION_ID()
//     and the cause; and never hides the critical section's own error (errors.Is finds it);
//   - watches the lock while the critical section runs: every watchdog interval (WithWatchdog,
//     1s by default) it checks IS_USED_LOCK(name) = CONNECTION_ID() on the lock's own
//     connection, and the first check that finds the lock gone cancels the section's context,
//     with context.Cause(ctx) wrapping ErrLockLost (see "A lost lock" for the window before it).
//
// A destroyed session's locks are freed when the server processes the disconnect, a moment
// (typically well under a millisecond, longer on a loaded server) after the client closed the
// socket: a TryDo in that instant may still see the lock held. The lock does not leak.
//
// RELEASE_LOCK returning anything but 1 means the lock was lost while the section ran (the
// session was killed, timed out or reconnected): another instance may have run at the same time,
// so it is an error for a person to check the data (ErrLockLost), not a warning.
//
// # A lost lock
//
// A lock is lost when its session ends (KILL CONNECTION, wait_timeout, a broken network the
// server notices) or a statement on that session releases it. The server frees the lock at
// that instant, and another instance's GET_LOCK may take it at once. The watchdog learns of
// the loss only at its next check: up to one watchdog interval later, plus that check's round
// trip (a killed session fails the check at once). Until then the section's context is not
// cancelled, and after that the section stops only where it looks at its context: a statement
// already sent completes. So for up to one interval two instances may run the section at
// once. The section's own statements run on other connections of the pool (the lock's
// connection is not lent out), so they do not die with the lock's session. What covers the
// window:
//
//   - the third layer below (a row lock, a UNIQUE index or an idempotency key that makes the
//     duplicate harmless): the only complete cover;
//   - with Job.OncePerPeriod, the ledger's key (job, period_start): the later of two runs of a
//     period fails to record and is reported as incident.LockLost; it tells a person, it does
//     not prevent;
//   - checking ctx before each write, or before each batch's commit, so that a section told to
//     stop writes nothing more;
//   - a shorter interval (WithWatchdog) narrows the window, at the cost of one IS_USED_LOCK
//     query per interval for each lock held, on the lock's own connection.
//
// # Jobs that must not run twice: three layers
//
// Applications run two or more instances (a rolling deploy overlaps old and new), so a job
// scheduled for midnight starts on each of them. Three layers prevent different duplicates:
//
//	layer                          prevents                                      limit
//	in-process running flag        a tick starting while the previous one runs   one process only
//	named lock (GET_LOCK)          two instances running the job at the same time a lock never released stops the job forever (hence the cleanup above)
//	row lock / UNIQUE / idem. key  duplicated effects when both layers above      designed per resource
//	                               were bypassed
//
// Locker.RunJob combines the first two, and with Job.OncePerPeriod adds a run ledger
// (outbox_job_runs, PRIMARY KEY (job, period_start)) so a daily job runs once per day even when
// instances take turns: the instance that gets the lock second finds the period recorded and
// skips it. A panic in a job's Run is recovered and treated as a failed run (reported as an
// incident, not recorded, the lock released); the schedule goes on.
//
// The question to ask for any new batch job: if two instances run this at once, what is
// duplicated, and can the database prevent it? If a row lock, a UNIQUE index or an idempotency
// key can make the duplicate harmless, use that and no job lock (the outbox worker does: its
// claim's row locks split the rows between instances, so it needs only the running flag). If
// not (a yearly leave accrual, a billing run, "create a user with this email" when soft deletes
// forbid a UNIQUE index), take the named lock, and keep the third layer wherever it is possible.
package mysqllock
