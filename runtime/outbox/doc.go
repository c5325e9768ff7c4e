// Package outbox is the runtime of outboxgen: a transactional outbox on one MySQL/MariaDB
// table (outbox_messages), with no broker. Generated code (outboxgen generate) calls Enqueue,
// Router.Handle and the types of this package; applications run a Worker and, for operators,
// Stats, ListFailed, Retry, Purge and Migrate.
//
// # The model
//
// A business transaction that must cause an effect elsewhere (a mail, a webhook, a call to
// another service) writes a row into outbox_messages in the same transaction, with Enqueue.
// The change and "this must be sent" commit or roll back together: no dual write, and the
// business transaction never waits on external I/O. A Worker later delivers each committed
// row to the handler registered for its event type, and records the result on the row.
//
// # The Tx story
//
// Enqueue runs one INSERT on the DBTX it is given, normally the caller's *sql.Tx. It never
// begins, commits or rolls back anything:
//   - the message is visible to workers only after the caller commits;
//   - if the caller rolls back, the message is gone with the rest of the transaction, and no
//     handler ever sees it;
//   - Enqueue on a *sql.DB would be its own autocommitted statement, outside any business
//     transaction: the dual write the outbox exists to avoid. Enqueue refuses it unless the
//     caller passes Standalone (the message is the only write it belongs with).
//
// Because Enqueue cannot know when the caller commits, it cannot wake a worker. InTx(ctx, db,
// fn) begins, runs fn, commits (rolling back on an error or a panic), and delivery starts at
// once instead of at the next poll: a message a Worker of this process on that *sql.DB handles
// is handed off to it (Enqueue writes the row already claimed by the worker, which runs the
// handler after the commit with no claim transaction; see InTx), and for any other message InTx
// wakes the workers after the commit. A caller that manages its own transaction calls
// Worker.Wake after Commit. Across
// processes polling is adaptive (Config.MinPollInterval while messages keep arriving, backing off
// to Config.PollInterval when idle).
// Migrate never runs on a caller's transaction: MySQL commits DDL implicitly.
//
// # The worker's cycle
//
//  1. Claim: one short READ COMMITTED transaction reads the ids of due PENDING rows of the
//     router's event types in the claim index's order without locking, locks them by primary
//     key with FOR UPDATE SKIP LOCKED (reading further windows when other claims hold them, and
//     a SKIP LOCKED scan of the index when they hold every window) and rechecks under the lock
//     that each is still due. It takes no more rows than there are free dispatch slots plus,
//     while recent handlers were fast, the rows those slots will start within 50ms (a
//     prefetched row that waited too long for a slot is given back unhandled rather than risk
//     outliving its lease). It marks them
//     PROCESSING with attempts+1, claimed_at, a lease (reclaim_after = claimed_at +
//     Config.StaleAfter) and a fresh claim_token, and commits. While a backlog drains, a claim
//     starts where the last one ended and scans from the front every 100ms.
//     Rows of types this router does not handle are never claimed, so an old instance in a
//     rolling deploy leaves new event types alone. Several workers, in one process or many,
//     take disjoint rows; no lock or leader is needed.
//  2. Dispatch: each handler runs outside every transaction and lock, with bounded
//     concurrency (Config.Concurrency) and its event's Policy.Timeout as its context deadline.
//     A panic is recovered and treated as an error, its stack kept in last_error.
//  3. Record: success -> SENT; an error -> PENDING again, due after the backoff (b to 1.5b for b = Initial x 2^(n-1),
//     computed in Go, applied in SQL from the database clock) or after the delay asked with
//     RetryAfter; Permanent errors, exhausted attempts and undecodable payloads (generated
//     wrappers return Permanent for them) -> FAILED with last_error. Results are written in
//     batches, one transaction per batch, and every write is fenced on (id, status
//     PROCESSING, claim_token) and checked by its rows affected: a worker whose claim was
//     reclaimed can never overwrite the new owner's result.
//  4. Reclaim: every worker, every Config.ReclaimInterval, returns PROCESSING rows whose lease
//     has passed to PENDING, or to FAILED when their attempts are exhausted. Attempts counted
//     the claim already, so a message that kills its worker cannot loop forever.
//  5. Watch: rows PROCESSING for more than three times their own lease mean nobody is
//     reclaiming. Stats counts them as Stuck, and every worker reports them through
//     Config.Reporter as incident.Stuck each time it sees any. Every incident is one
//     error-level line on Config.Logger, with the default Reporter or a custom one.
//
// Every status time comes from the database clock (UTC), never the application's, so
// instances with skewed clocks agree, and the lease lives on the row, so workers with
// different StaleAfter share one table and Stats needs no worker configuration.
//
// # At-least-once
//
// Delivery is at-least-once, not exactly-once: a worker that runs a handler and dies (or loses
// its database connection) before its result is recorded leaves the row PROCESSING; after the
// lease the row is reclaimed and delivered again, with Delivery.Attempt counting both claims.
// Handlers whose effects must not repeat deduplicate on Delivery.IdempotencyKey, for database
// effects with Once in the handler's own transaction. A handler that fails must return an
// error: swallowing it marks the message SENT and defeats the outbox.
//
// # Deadlines and shutdown
//
// Every event timeout must be shorter than the worker's StaleAfter (NewWorker refuses
// otherwise): a handler still running when its lease ends would be reclaimed and run twice.
// A handler that returns nil after its deadline still counts as a success; the fence decides
// whether that write lands.
//
// Cancelling Run's context stops claiming at once, and no handler starts after it: rows the
// worker claimed ahead of its free slots are given back at once (PENDING, due now, the attempt
// not counted), so other workers deliver them. Handlers already running keep their own
// context until their event timeout, or until Config.ShutdownTimeout passes, when it is
// cancelled; the results of the handlers that return are recorded, and Run returns nil.
//
// A database outage does not end Run: failed claims, reclaims and stuck checks are logged and
// tried again, and claims resume once the database answers. Run returns an error only when
// the Worker is already running, so it needs no restart loop.
//
// Go cannot kill a goroutine. A handler that ignores its context keeps running, and keeps its
// dispatch slot, for as long as it likes: the worker reports it as incident.HandlerHung once
// it outlives its timeout, and at shutdown Run returns without it. Whatever it does after that
// is not recorded; its row stays PROCESSING until its lease passes and another worker
// reclaims it. Handlers must honour their context.
//
// # Schema
//
// Migrate creates the tables that are missing and leaves existing ones alone, so an
// application can call it at startup as a user without the CREATE privilege once the tables
// exist (applied by a DBA from `outboxgen schema`, say). It fails, naming the table and the
// missing columns, when an existing table lacks a column the runtime uses.
//
// Each table's COMMENT is "outboxgen schema N" or "outboxgen schema N min M": its version, and
// the oldest version that may run on it (M = N when absent). NewWorker refuses tables whose M
// is above SchemaVersion, naming both numbers (ErrSchemaTooNew), and a running worker that
// sees such a table stops claiming and reports an incident.SchemaTooNew. An additive change
// keeps M, so older workers of a rolling deploy go on.
//
// # Connection settings
//
// The DSN must set parseTime=true and use loc=UTC (go-sql-driver/mysql's default), or a loc
// whose offset is zero at every instant (loc=Local where the process's zone is UTC); NewWorker
// and Migrate check both and name the parameter when it is wrong. interpolateParams does not
// matter to this package: Enqueue, the claim and the result writes send their values inline,
// one round trip per statement either way (the driver would otherwise prepare, execute and
// close every statement with arguments, which was most of what an enqueue cost).
//
// # Generated code support
//
// IdempotencyKeyOf, OrderingKeyOf, KeyText, PayloadCheck, PayloadList, PayloadMap and
// SendDirect are what files of outboxgen generate call instead of carrying copies, so a fix
// in them reaches generated code with a runtime upgrade. They are not meant for hand use, and
// their output is part of the stored data: a key computed today stays byte for byte the same
// in later releases. Each generated file carries a guard that the compiler checks, in the
// shape of protoc-gen-go's EnforceVersion:
//
//	const (
//		_ = outbox.RegenerateWithOutboxgen(3 - outbox.MinGeneratedCodeVersion)
//		_ = outbox.UpgradeOutboxgenRuntime(outbox.GeneratedCodeVersion - 3)
//	)
//
// where 3 is the version of the generator that wrote it. A file older than the runtime
// supports fails to build with "constant -1 overflows outbox.RegenerateWithOutboxgen": run go
// generate with the runtime's own outboxgen (go tool outboxgen is, since the tool and the
// runtime are one module). A file newer than the runtime fails with "constant -1 overflows
// outbox.UpgradeOutboxgenRuntime": go get the github.com/outboxgen/outboxgen release that
// generated it, which the file's comment names.
package outbox
