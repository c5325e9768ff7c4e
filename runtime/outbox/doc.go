// Package outbox is the runtime of outboxgen: a transactional outbox on one MySQL/MariaDB
// table, outbox_messages, with no broker. Generated code calls Enqueue, Router.Handle and the
// types of this package. Applications run a Worker. Operators use Stats, ListFailed, Retry,
// Purge and Migrate.
//
// # The model
//
// A business transaction that must cause an effect elsewhere writes a row into
// outbox_messages in the same transaction, with Enqueue. The effect may be a mail, a webhook or
// a call to another service. The change and "this must be sent" commit or roll back together,
// so there is no dual write. The business transaction never waits on external I/O. A Worker
// later delivers each committed row to the handler registered for its event type, and records
// the result on the row.
//
// # The Tx story
//
// Enqueue runs one INSERT on the DBTX it is given, normally the caller's *sql.Tx. It never
// begins, commits or rolls back anything.
//   - The message is visible to workers only after the caller commits.
//   - If the caller rolls back, the message is gone with the rest of the transaction, and no
//     handler ever sees it.
//   - Enqueue on a *sql.DB would be its own autocommitted statement, outside any business
//     transaction. That is the dual write the outbox exists to avoid. Enqueue refuses it
//     unless the caller passes Standalone, which says the message is the only write it
//     belongs with.
//
// Because Enqueue cannot know when the caller commits, it cannot wake a worker. InTx begins a
// transaction, runs fn and commits it, or rolls it back on an error or a panic. Delivery then
// starts at once instead of at the next poll. A message that a Worker of this process on the
// same *sql.DB handles is handed off to that worker, which runs the handler after the commit.
// For any other message, InTx wakes the workers after the commit. A caller that manages its
// own transaction calls Worker.Wake after Commit. Across processes, polling adapts. It runs
// every Config.MinPollInterval while messages keep arriving and backs off to
// Config.PollInterval when idle. Migrate never runs on a caller's transaction, because MySQL
// commits DDL implicitly.
//
// # The worker's cycle
//
//  1. Claim. One short READ COMMITTED transaction locks due PENDING rows of the router's event
//     types and marks them PROCESSING. Each claimed row gets one more attempt, a lease that
//     ends Config.StaleAfter after the claim, and a fresh claim token. Rows of types this
//     router does not handle are never claimed, so an old instance in a rolling deploy leaves
//     new event types alone. Several workers, in one process or many, take disjoint rows with
//     no lock or leader. A claim takes no more rows than the worker can start soon.
//  2. Dispatch. Each handler runs outside every transaction and lock. Config.Concurrency
//     bounds how many run at once. The event's Policy.Timeout is the deadline of the
//     handler's context. A panic is recovered and treated as an error, and its stack is kept
//     in last_error.
//  3. Record. A success makes the row SENT. An error makes it PENDING again, due after the
//     backoff or after the delay asked with RetryAfter. The backoff is computed in Go and
//     applied on the database clock. A Permanent error, exhausted attempts and an undecodable
//     payload make it FAILED with last_error. Results are written in batches, one
//     transaction per batch. Every write is fenced on the row's claim token, so a worker whose
//     claim was reclaimed never overwrites the new owner's result.
//  4. Reclaim. Every Config.ReclaimInterval, every worker returns PROCESSING rows whose lease
//     has passed to PENDING, or to FAILED when their attempts are spent. The claim counted
//     the attempt already, so a message that kills its worker cannot loop forever.
//  5. Watch. Rows PROCESSING for more than three times their own lease mean nobody is
//     reclaiming. Stats counts them as Stuck. Every worker reports them through
//     Config.Reporter as incident.Stuck each time it sees any. Every incident is one
//     error-level line on Config.Logger, with the default Reporter or a custom one.
//
// Every status time comes from the database clock in UTC, never the application's, so
// instances with skewed clocks agree. The lease lives on the row, so workers with different
// StaleAfter share one table and Stats needs no worker configuration. docs/design.md describes
// how the claim, the lease and the fence work.
//
// # At-least-once
//
// Delivery is at-least-once, not exactly-once. A worker may run a handler and die, or lose its
// database connection, before its result is recorded. The row then stays PROCESSING until its
// lease passes. It is then reclaimed and delivered again, and Delivery.Attempt counts both
// claims. Handlers whose effects must not repeat deduplicate on Delivery.IdempotencyKey. For
// database effects, Once does it in the handler's own transaction. A handler that fails must
// return an error. Swallowing the error marks the message SENT and defeats the outbox.
//
// # Deadlines and shutdown
//
// Every event timeout must be shorter than the worker's StaleAfter, and NewWorker refuses it
// otherwise. A handler still running when its lease ends would be reclaimed and run twice. A
// handler that returns nil after its deadline still counts as a success. The fence decides
// whether that write lands.
//
// Cancelling Run's context stops claiming at once, and no handler starts after it. Rows the
// worker claimed ahead of its free slots are given back at once, PENDING and due now, with
// their attempt not counted. Other workers then deliver them. A handler already running keeps
// its own context until its event timeout or until Config.ShutdownTimeout passes, whichever
// comes first. The results of the handlers that return are recorded, and Run returns nil.
//
// A database outage does not end Run. Failed claims, reclaims and stuck checks are logged and
// tried again, and claims resume once the database answers. Run returns an error only when
// the Worker is already running, so it needs no restart loop.
//
// Go cannot kill a goroutine. A handler that ignores its context keeps running, and keeps its
// dispatch slot, for as long as it likes. The worker reports it as incident.HandlerHung once it
// outlives its timeout, and at shutdown Run returns without it. Whatever it does after that is
// not recorded. Its row stays PROCESSING until its lease passes and another worker reclaims
// it. Handlers must honour their context.
//
// # Schema
//
// Migrate creates the tables that are missing and leaves existing ones alone. An application
// can therefore call it at startup as a user without the CREATE privilege, once a DBA applied
// the tables from `outboxgen schema`. It fails when an existing table lacks a column the
// runtime uses, naming the table and the missing columns.
//
// Each table's COMMENT is "outboxgen schema N" or "outboxgen schema N min M". N is its version
// and M the oldest version that may run on it. M is N when absent. NewWorker refuses tables
// whose M is above SchemaVersion with ErrSchemaTooNew, naming both numbers. A running worker
// that sees such a table stops claiming and reports an incident.SchemaTooNew. An additive
// change keeps M, so the older workers of a rolling deploy go on.
//
// # Connection settings
//
// The DSN must set parseTime=true and use loc=UTC, which is go-sql-driver/mysql's default. A
// loc whose offset is zero at every instant also works, such as loc=Local where the process's
// zone is UTC. NewWorker and Migrate check both and name the parameter when it is wrong.
// interpolateParams does not matter to this package. Enqueue, the claim and the result writes
// send their values inline, one round trip per statement either way.
//
// # Generated code support
//
// Files of outboxgen generate call IdempotencyKeyOf, OrderingKeyOf, KeyText, PayloadCheck,
// PayloadList, PayloadMap and SendDirect instead of carrying copies. A fix in them therefore
// reaches generated code with a runtime upgrade. They are not meant for hand use. Their output
// is part of the stored data, so a key computed by one release stays byte for byte the same
// in later releases. Each generated file carries a guard that the compiler checks, in the
// shape of protoc-gen-go's EnforceVersion.
//
//	const (
//		_ = outbox.RegenerateWithOutboxgen(3 - outbox.MinGeneratedCodeVersion)
//		_ = outbox.UpgradeOutboxgenRuntime(outbox.GeneratedCodeVersion - 3)
//	)
//
// Here 3 is the version of the generator that wrote the file. A file older than the runtime
// supports fails to build with "constant -1 overflows outbox.RegenerateWithOutboxgen". The fix
// is to run go generate with the runtime's own outboxgen. go tool outboxgen is that one, since
// the tool and the runtime are one module. A file newer than the runtime fails with "constant
// -1 overflows outbox.UpgradeOutboxgenRuntime". The fix is to go get the
// github.com/outboxgen/outboxgen release that generated it, which the file's comment names.
package outbox
