-- Retention (runtime/outbox/retention.go): the worker's cleaner deletes SENT rows (and FAILED
-- rows, when asked) of its router's event types once they are older than its Config.Retention,
-- by the database clock. One worker per database runs it at a time, under a named lock.

-- name: RetentionLock :many
-- The cleaner's named lock, taken without waiting (timeout 0): a worker that finds it held
-- skips the pass, since another worker is cleaning. Its name includes a hash of the database
-- (60 lowercase ASCII characters, under MySQL's limit of 64), so that databases on one server
-- clean side by side. The hash is of bytes, as in OrderingKeyLock. 1 = acquired, 0 = held by
-- another session, -1 = NULL: the server failed the call. (Typed as in locks.sql.)
SELECT CAST(COALESCE(GET_LOCK(CONCAT('outboxgen.retention.', LEFT(SHA2(COALESCE(CAST(DATABASE() AS BINARY), x''), 256), 40)), 0), -1) AS SIGNED) AS acquired;

-- name: RetentionUnlock :exec
SELECT RELEASE_LOCK(CONCAT('outboxgen.retention.', LEFT(SHA2(COALESCE(CAST(DATABASE() AS BINARY), x''), 256), 40)));

-- name: RetentionSentIDs :many
-- One batch of SENT rows past the retention, oldest first, read without locks. The scan runs
-- on the claim index, bounded by next_attempt_at as MessagePurgeSent's is (a row's
-- next_attempt_at is never after its sent_at), so it stops at the cutoff instead of reading
-- every retained SENT entry; FORCE INDEX keeps that plan. Only rows of the worker's event types
-- are taken, and no ordered row whose queue entry still exists (a SENT message's entry goes in
-- the transaction that marks it SENT, so this only guards against rows changed by hand).
SELECT m.id
FROM outbox_messages m FORCE INDEX (outbox_messages_claim)
WHERE m.status = 'SENT'
  AND m.next_attempt_at < TIMESTAMPADD(MICROSECOND, 0 - CAST(sqlc.arg(older_than_us) AS SIGNED), TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()))
  AND m.sent_at < TIMESTAMPADD(MICROSECOND, 0 - CAST(sqlc.arg(older_than_us) AS SIGNED), TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()))
  AND m.event_type IN (sqlc.slice('event_types'))
  AND (m.ordering_key IS NULL
       OR NOT EXISTS (SELECT 1 FROM outbox_ordering_queue q WHERE q.message_id = m.id))
ORDER BY m.next_attempt_at, m.id
LIMIT ?;

-- name: RetentionFailedIDs :many
-- As RetentionSentIDs, for FAILED rows (a row made FAILED by hand without failed_at counts as
-- failed at its next_attempt_at). A FAILED ordered head still holds its key in the queue, so it
-- is kept: releasing the key is an operator's decision (outbox.Purge by id, Retry).
SELECT m.id
FROM outbox_messages m FORCE INDEX (outbox_messages_claim)
WHERE m.status = 'FAILED'
  AND m.next_attempt_at < TIMESTAMPADD(MICROSECOND, 0 - CAST(sqlc.arg(older_than_us) AS SIGNED), TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()))
  AND COALESCE(m.failed_at, m.next_attempt_at) < TIMESTAMPADD(MICROSECOND, 0 - CAST(sqlc.arg(older_than_us) AS SIGNED), TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()))
  AND m.event_type IN (sqlc.slice('event_types'))
  AND (m.ordering_key IS NULL
       OR NOT EXISTS (SELECT 1 FROM outbox_ordering_queue q WHERE q.message_id = m.id))
ORDER BY m.next_attempt_at, m.id
LIMIT ?;

-- name: RetentionDeleteSent :execrows
-- Deletes the ids RetentionSentIDs read, by primary key, so that the statement locks those rows
-- alone (no range of the claim index, where claims and enqueues work). The conditions are
-- checked again on the latest committed row: a row that changed since the read stays.
DELETE FROM outbox_messages
WHERE id IN (sqlc.slice('ids'))
  AND status = 'SENT'
  AND sent_at < TIMESTAMPADD(MICROSECOND, 0 - CAST(sqlc.arg(older_than_us) AS SIGNED), TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()))
  AND (ordering_key IS NULL
       OR NOT EXISTS (SELECT 1 FROM outbox_ordering_queue q WHERE q.message_id = outbox_messages.id));

-- name: RetentionDeleteFailed :execrows
-- As RetentionDeleteSent, for the ids RetentionFailedIDs read.
DELETE FROM outbox_messages
WHERE id IN (sqlc.slice('ids'))
  AND status = 'FAILED'
  AND COALESCE(failed_at, next_attempt_at) < TIMESTAMPADD(MICROSECOND, 0 - CAST(sqlc.arg(older_than_us) AS SIGNED), TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()))
  AND (ordering_key IS NULL
       OR NOT EXISTS (SELECT 1 FROM outbox_ordering_queue q WHERE q.message_id = outbox_messages.id));

-- name: RetentionIdleCounters :many
-- Ordering counters (outbox_ordering) of keys with nothing in the queue, in key order after a
-- cursor, read without locks: the candidates that RetentionLockCounters then locks and checks.
SELECT o.ordering_key
FROM outbox_ordering o
WHERE o.ordering_key > sqlc.arg(after_key)
  AND NOT EXISTS (SELECT 1 FROM outbox_ordering_queue q WHERE q.ordering_key = o.ordering_key)
ORDER BY o.ordering_key
LIMIT ?;

-- name: RetentionLockCounters :many
-- Locks the candidates' counter rows, skipping those another transaction holds: an enqueue of
-- the key holds its counter row until it commits, so the cleaner leaves that key alone instead
-- of waiting for it. Never waiting here also keeps the cleaner out of any lock cycle with an
-- enqueue that takes several keys' counters in its own order.
SELECT ordering_key FROM outbox_ordering
WHERE ordering_key IN (sqlc.slice('keys'))
FOR UPDATE SKIP LOCKED;

-- name: RetentionQueuedKeys :many
-- Of the locked keys, those with a queue entry now, by a locking read (the latest committed
-- entries, waiting for a transaction that is changing one). Every enqueue of a key takes its
-- counter row before it writes a queue entry, so a key without entries here stays without
-- them until the counter is deleted.
SELECT ordering_key FROM outbox_ordering_queue
WHERE ordering_key IN (sqlc.slice('keys'))
FOR UPDATE;

-- name: RetentionDeleteCounters :execrows
-- Deletes the locked counters whose keys have nothing queued. The next enqueue of such a key
-- starts it again at seq 1, which orders it correctly: no message of the key waits.
DELETE FROM outbox_ordering
WHERE ordering_key IN (sqlc.slice('keys'));

-- name: RetentionJobLatest :many
-- Each job's latest recorded period in the mysqllock run ledger (outbox_job_runs), read by
-- the PRIMARY KEY (job, period_start) one job at a time.
SELECT job, CAST(MAX(period_start) AS DATETIME(6)) AS latest
FROM outbox_job_runs
GROUP BY job
ORDER BY job;

-- name: RetentionDeleteJobRuns :execrows
-- One batch of a job's ledger rows that are past their use: older than the job's latest
-- period, and whose period started more than older_than_us ago. The ledger is read only for
-- the period a run belongs to, which is the latest or a newer one; the older rows are history
-- for mysqllock.Runs and the console, kept that long. A range of the PRIMARY KEY, oldest first.
DELETE FROM outbox_job_runs
WHERE job = sqlc.arg(job)
  AND period_start < sqlc.arg(latest)
  AND period_start < TIMESTAMPADD(MICROSECOND, 0 - CAST(sqlc.arg(older_than_us) AS SIGNED), TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()))
ORDER BY period_start
LIMIT ?;

-- name: RetentionOldestSent :many
-- How long ago the SENT row due first was sent, in microseconds: the age of what retention has
-- kept longest. One index entry, whatever the table holds. A row is sent soon after it was last
-- due, so this is the oldest sent_at to within the delivery lag of those rows.
SELECT CAST(TIMESTAMPDIFF(MICROSECOND, sent_at, TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP())) AS SIGNED) AS age_us
FROM outbox_messages FORCE INDEX (outbox_messages_claim)
WHERE status = 'SENT'
ORDER BY next_attempt_at, id
LIMIT 1;
