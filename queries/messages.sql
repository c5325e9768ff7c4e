-- Queries on outbox_messages, compiled by sqlc into runtime/internal/store.
--
-- The clock. Every status time comes from the database in UTC with microseconds, never from the
-- application, so instances with skewed clocks agree. UTC_TIMESTAMP(6) is what is meant. sqlc
-- knows UTC_TIMESTAMP() only without a precision, and NOW(6) follows the session time_zone. So
-- it is spelled
--     TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP())
-- which is exactly UTC_TIMESTAMP(6). NOW and UTC_TIMESTAMP both read the statement's start time.
-- Time-zone offsets are whole seconds, so NOW(6)'s microseconds are UTC's microseconds.
--
-- Every write after a claim is fenced on the id, status PROCESSING and the claim token. A worker
-- whose row was reclaimed can never overwrite the new owner's result. RowsAffected says whether
-- the write landed, with clientFoundRows off. The result writes FORCE INDEX (PRIMARY). Left to
-- itself, the optimizer may plan them on a status index. Under REPEATABLE READ that takes
-- next-key locks across every PROCESSING row and the gap where new PENDING rows go. It would
-- block other workers' writes and the application's enqueues. By primary key the writes lock
-- exactly their own rows, as TestResultWriteLocksOnlyItsOwnRows checks.

-- name: ClockNow :one
-- The connection check scans this into a time.Time. The scan fails without parseTime=true. Its
-- Location says whether loc=UTC.
SELECT TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()) AS now;

-- name: MessageInsert :execlastid
-- One INSERT per enqueue, on the caller's transaction. created_at and next_attempt_at both come
-- from the database clock, and UTC_TIMESTAMP is constant within one statement. IFNULL is there
-- because MariaDB's sql_mode EMPTY_STRING_IS_NULL turns an empty key argument into NULL.
-- The CAST to BINARY is there because a text argument is taken in the connection's charset. A
-- DSN with charset=utf8 or latin1 would refuse or mangle an emoji. A binary string goes into the
-- utf8mb4 column as the bytes it is, and Enqueue checks they are UTF-8. Every read of payload,
-- headers and last_error casts to binary for the same reason, in the other direction.
INSERT INTO outbox_messages (
    event_type, payload, idempotency_key, headers, ordering_key, ordering_seq, status, attempts, max_attempts, next_attempt_at, created_at
) VALUES (
    sqlc.arg(event_type), CAST(sqlc.arg(payload) AS BINARY), IFNULL(sqlc.arg(idempotency_key), x''), CAST(sqlc.narg(headers) AS BINARY),
    sqlc.narg(ordering_key), sqlc.narg(ordering_seq), 'PENDING', 0, sqlc.arg(max_attempts),
    TIMESTAMPADD(MICROSECOND, CAST(sqlc.arg(delay_us) AS SIGNED), TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP())), TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP())
);

-- name: MessageInsertNow :execlastid
-- MessageInsert for the usual message, with no ordering key and no delay. It sets only the
-- columns without a default and does no delay arithmetic. Each expression the server evaluates
-- shows in the enqueue's cost, as BENCHMARKS.md measures.
INSERT INTO outbox_messages (
    event_type, payload, idempotency_key, headers, max_attempts, next_attempt_at, created_at
) VALUES (
    sqlc.arg(event_type), CAST(sqlc.arg(payload) AS BINARY), IFNULL(sqlc.arg(idempotency_key), x''), CAST(sqlc.narg(headers) AS BINARY), sqlc.arg(max_attempts),
    TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()), TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP())
);

-- name: MessageInsertClaimed :execlastid
-- InTx's hand-off. It is the same INSERT, but the row is born claimed by a worker of the
-- enqueuing process. It is exactly as MessageClaimMark would leave it, PROCESSING with attempts
-- 1, a lease and a claim token. No claim transaction is needed, since after the commit the
-- worker dispatches it straight from memory. No other worker can claim it, since it is not
-- PENDING. If the process dies first, the lease expires and the reclaim makes it PENDING again.
INSERT INTO outbox_messages (
    event_type, payload, idempotency_key, headers, status, attempts, max_attempts, next_attempt_at, created_at,
    claimed_at, reclaim_after, claim_token
) VALUES (
    sqlc.arg(event_type), CAST(sqlc.arg(payload) AS BINARY), IFNULL(sqlc.arg(idempotency_key), x''), CAST(sqlc.narg(headers) AS BINARY),
    'PROCESSING', 1, sqlc.arg(max_attempts),
    TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()), TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()),
    TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()),
    TIMESTAMPADD(MICROSECOND, CAST(sqlc.arg(lease_us) AS SIGNED), TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP())),
    sqlc.arg(claim_token)
);

-- name: MessageClaimCandidates :many
-- Step 1 of the claim, inside a READ COMMITTED transaction. It reads up to 2n due rows of the
-- router's types after a position, by a plain consistent read that locks nothing. The position
-- is a due time and an id. The ORDER BY is exactly the index order, so there is no filesort.
-- When other claims held the previous window's rows, the position is where that window ended.
-- Rows may share a next_attempt_at, since Retry and the reclaim give whole batches one. While a
-- backlog drains, the position is where the worker's last claim ended. Every claimed row leaves
-- a delete-marked entry at the front of the index until InnoDB's purge removes it. The worker
-- still scans from the start often.
-- An ordered row is a candidate only as its key's head, with the smallest seq of its key in
-- outbox_ordering_queue. Every message of the key before it is then sent. The head is checked
-- here, by a non-locking read, and not in the locking step. A locking read that skips locked
-- rows would skip a locked predecessor and take its successor for a head. Being the head is
-- stable, since seqs are handed out in commit order and a sent message never comes back. The
-- check thus cannot go stale before the lock. Unordered rows pay one IS NULL test.
SELECT m.id, m.next_attempt_at
FROM outbox_messages m
WHERE m.status = 'PENDING'
  AND (m.next_attempt_at > sqlc.arg(after_due) OR (m.next_attempt_at = sqlc.arg(after_due) AND m.id > sqlc.arg(after_id)))
  AND m.next_attempt_at <= TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP())
  AND m.event_type IN (sqlc.slice('event_types'))
  AND (m.ordering_key IS NULL
       OR m.ordering_seq = (SELECT MIN(q.seq) FROM outbox_ordering_queue q WHERE q.ordering_key = m.ordering_key))
ORDER BY m.next_attempt_at, m.id
LIMIT ?;

-- name: MessageClaimLockIDs :many
-- Step 2 of the claim, in the same transaction. It locks up to n of the candidates by primary
-- key and skips rows another claimer holds. It rechecks under the lock that each is still
-- PENDING, due and of the router's types, since a locking read sees the latest committed row.
-- Locking through the primary key is what makes this cheap. A locking read through the claim
-- index is slower, as BENCHMARKS.md measures. A transaction's own locks are not skipped, and
-- the worker never passes ids it already holds.
SELECT id, event_type, CAST(payload AS BINARY) AS payload, idempotency_key, CAST(headers AS BINARY) AS headers, ordering_key, ordering_seq,
       attempts, max_attempts, created_at, next_attempt_at
FROM outbox_messages FORCE INDEX (PRIMARY)
WHERE id IN (sqlc.slice('ids'))
  AND status = 'PENDING'
  AND next_attempt_at <= TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP())
  AND event_type IN (sqlc.slice('event_types'))
ORDER BY id
LIMIT ?
FOR UPDATE SKIP LOCKED;

-- name: MessageClaimSelect :many
-- Step 2 of the claim when other claims held every candidate window. A hung worker may have left
-- a claim open, or many workers claim at once. It locks due rows straight from the claim index.
-- SKIP LOCKED passes over held rows wherever they are. It is slower than MessageClaimLockIDs, so
-- it is only the fallback. The ORDER BY is exactly the index order. Any other order adds a
-- filesort, and the first claimer locks every candidate, as "The claim" in docs/design.md
-- explains. It returns rows this claim already holds too. It never returns ordered rows.
-- Whether one is its key's head is a non-locking read in MessageClaimCandidates. Ordered rows
-- are therefore claimed through the candidates only.
SELECT id, event_type, CAST(payload AS BINARY) AS payload, idempotency_key, CAST(headers AS BINARY) AS headers, ordering_key, ordering_seq,
       attempts, max_attempts, created_at, next_attempt_at
FROM outbox_messages
WHERE status = 'PENDING'
  AND (next_attempt_at > sqlc.arg(after_due) OR (next_attempt_at = sqlc.arg(after_due) AND id > sqlc.arg(after_id)))
  AND next_attempt_at <= TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP())
  AND event_type IN (sqlc.slice('event_types'))
  AND ordering_key IS NULL
ORDER BY next_attempt_at, id
LIMIT ?
FOR UPDATE SKIP LOCKED;

-- name: MessageClaimMark :execrows
-- The claim's last statement, in the same transaction. The lease, reclaim_after, lives on the
-- row. It forces the primary key, as the result writes do. Without the hint a server may choose
-- a range scan of the claim index by its status prefix. That scan locks, and waits for, rows
-- that other claims hold. MariaDB 11.8 does so.
UPDATE outbox_messages FORCE INDEX (PRIMARY)
SET status        = 'PROCESSING',
    attempts      = attempts + 1,
    claimed_at    = TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()),
    reclaim_after = TIMESTAMPADD(MICROSECOND, CAST(sqlc.arg(lease_us) AS SIGNED), TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP())),
    claim_token   = sqlc.arg(claim_token)
WHERE status = 'PENDING'
  AND id IN (sqlc.slice('ids'));

-- name: MessageMarkSent :execrows
-- Fenced, for a whole claim's successes at once. claim_token stays on the row, to record which
-- claim delivered the message.
UPDATE outbox_messages FORCE INDEX (PRIMARY)
SET status  = 'SENT',
    sent_at = TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP())
WHERE status = 'PROCESSING'
  AND claim_token = sqlc.arg(claim_token)
  AND id IN (sqlc.slice('ids'));

-- name: MessageMarkRetry :execrows
-- Fenced. The row goes back to PENDING after a backoff that Go computes and SQL applies. A row
-- an operator cancelled while it ran becomes CANCELLED instead.
UPDATE outbox_messages FORCE INDEX (PRIMARY)
SET status          = IF(cancelled_at IS NULL, 'PENDING', 'CANCELLED'),
    next_attempt_at = TIMESTAMPADD(MICROSECOND, CAST(sqlc.arg(delay_us) AS SIGNED), TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP())),
    last_error      = sqlc.arg(last_error)
WHERE id = sqlc.arg(id)
  AND status = 'PROCESSING'
  AND claim_token = sqlc.arg(claim_token);

-- name: MessageGiveBack :execrows
-- Fenced. It serves a claimed row whose handler never ran, or was cut off by the shutdown
-- deadline. A prefetched row may have waited too long for a slot, or the worker shut down
-- first. The row goes back to PENDING, due at once. It gets its claim's attempt back, since that
-- was not a real attempt. last_error keeps the previous real failure. A row an operator
-- cancelled meanwhile becomes CANCELLED instead.
UPDATE outbox_messages FORCE INDEX (PRIMARY)
SET status          = IF(cancelled_at IS NULL, 'PENDING', 'CANCELLED'),
    attempts        = GREATEST(attempts, 1) - 1,
    next_attempt_at = TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP())
WHERE id = sqlc.arg(id)
  AND status = 'PROCESSING'
  AND claim_token = sqlc.arg(claim_token);

-- name: MessageMarkFailed :execrows
-- Fenced. It records a permanent error, exhausted attempts or an undecodable payload.
UPDATE outbox_messages FORCE INDEX (PRIMARY)
SET status     = 'FAILED',
    failed_at  = TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()),
    last_error = sqlc.arg(last_error)
WHERE id = sqlc.arg(id)
  AND status = 'PROCESSING'
  AND claim_token = sqlc.arg(claim_token);

-- name: MessageTokensByIDs :many
-- After a fenced batch landed partly, it finds the rows that no longer carry the claim. Their
-- writes were refused.
SELECT id, status, claim_token
FROM outbox_messages
WHERE id IN (sqlc.slice('ids'));

-- name: MessageReclaimStale :execrows
-- Leases that expired, because the claiming worker died or hung. The rows go back to PENDING, or
-- to FAILED when the attempts are exhausted, or to CANCELLED when an operator cancelled them
-- while they ran. A cancelled ordered row's queue entry goes in the same transaction
-- (ReclaimCancelledOrderedIDs), since a CANCELLED head never runs again. attempts counted the claim already, so the reclaim
-- adds none. A message that kills its worker thus cannot loop forever. Assignments run left to
-- right and see earlier ones. Every IF therefore tests attempts and max_attempts, which this
-- statement does not change. last_error says what happened either way, since a crash or a hang
-- leaves no other trace on the row. It keeps the start of the previous error, the handler's
-- own, after it. Its empty strings are hex literals. MariaDB's sql_mode EMPTY_STRING_IS_NULL
-- makes an empty quoted string NULL, and with it the whole CONCAT.
UPDATE outbox_messages
SET status          = IF(cancelled_at IS NOT NULL, 'CANCELLED', IF(attempts >= max_attempts, 'FAILED', 'PENDING')),
    failed_at       = IF(cancelled_at IS NULL AND attempts >= max_attempts, TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()), failed_at),
    last_error      = CONCAT('lease expired (claim ', COALESCE(claim_token, x''), '): its worker died or its handler outlived the lease',
                         IF(cancelled_at IS NOT NULL, '; cancelled while it ran',
                            IF(attempts >= max_attempts, '; attempts exhausted', '; reclaimed for another attempt')),
                         COALESCE(CONCAT('; the error before: ', LEFT(last_error, 2000)), x'')),
    next_attempt_at = TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP())
WHERE status = 'PROCESSING'
  AND reclaim_after < TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP())
LIMIT ?;

-- name: MessageCountStuck :one
-- A stuck row is PROCESSING for more than three times its own lease. Nobody is reclaiming it.
SELECT CAST(COUNT(*) AS SIGNED) AS stuck
FROM outbox_messages
WHERE status = 'PROCESSING'
  AND TIMESTAMPDIFF(MICROSECOND, claimed_at, TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()))
      > 3 * TIMESTAMPDIFF(MICROSECOND, claimed_at, reclaim_after);

-- name: MessageStatsByType :many
-- It never counts SENT rows, since that part of the table grows without bound. oldest_due_us is
-- how long the longest-waiting due row has been claimable, since its next_attempt_at. Unlike
-- the pending age, it ignores delayed and backed-off rows, so it grows only when nobody claims.
-- An ordered row waiting behind its key's head is pending but not due, since it cannot be
-- claimed yet. OrderingHeldKeys reports a held key as such, not as a dead fleet. Every SUM is
-- COALESCEd. A condition on a NULL is NULL. An ordered row without a queue entry has no head
-- seq to compare, and a row made PROCESSING by hand may lack its lease. A group of only such
-- rows would sum to NULL and fail the whole query, for every type.
SELECT m.event_type,
       CAST(COALESCE(SUM(m.status = 'PENDING'), 0) AS SIGNED) AS pending,
       CAST(COALESCE(SUM(m.status = 'PENDING' AND m.next_attempt_at <= TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP())
                AND (m.ordering_key IS NULL OR m.ordering_seq = (SELECT MIN(q.seq) FROM outbox_ordering_queue q WHERE q.ordering_key = m.ordering_key))), 0) AS SIGNED) AS due,
       CAST(COALESCE(SUM(m.status = 'PROCESSING'), 0) AS SIGNED) AS processing,
       CAST(COALESCE(SUM(m.status = 'PROCESSING' AND m.reclaim_after < TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP())), 0) AS SIGNED) AS stale,
       CAST(COALESCE(SUM(m.status = 'PROCESSING'
                AND TIMESTAMPDIFF(MICROSECOND, m.claimed_at, TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()))
                    > 3 * TIMESTAMPDIFF(MICROSECOND, m.claimed_at, m.reclaim_after)), 0) AS SIGNED) AS stuck,
       CAST(COALESCE(SUM(m.status = 'FAILED'), 0) AS SIGNED) AS failed,
       CAST(COALESCE(SUM(m.status = 'CANCELLED'), 0) AS SIGNED) AS cancelled,
       CAST(COALESCE(MAX(IF(m.status = 'PENDING', TIMESTAMPDIFF(MICROSECOND, m.created_at, TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP())), NULL)), 0) AS SIGNED) AS oldest_pending_us,
       CAST(COALESCE(MAX(IF(m.status = 'PENDING' AND m.next_attempt_at <= TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP())
                             AND (m.ordering_key IS NULL OR m.ordering_seq = (SELECT MIN(q.seq) FROM outbox_ordering_queue q WHERE q.ordering_key = m.ordering_key)),
                            TIMESTAMPDIFF(MICROSECOND, m.next_attempt_at, TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP())), NULL)), 0) AS SIGNED) AS oldest_due_us
FROM outbox_messages m
WHERE m.status IN ('PENDING', 'PROCESSING', 'FAILED', 'CANCELLED')
GROUP BY m.event_type
ORDER BY m.event_type;

-- name: MessageListFailed :many
-- all_ids means no id filter, else the ids are listed. An empty event_type means any type. A
-- NULL failed_since means any time.
SELECT id, event_type, CAST(payload AS BINARY) AS payload, idempotency_key, attempts, max_attempts,
       CAST(last_error AS BINARY) AS last_error, created_at, failed_at
FROM outbox_messages
WHERE status = 'FAILED'
  AND (CAST(sqlc.arg(all_ids) AS SIGNED) = 1 OR id IN (sqlc.slice('ids')))
  AND (CAST(sqlc.arg(any_type) AS SIGNED) = 1 OR event_type = sqlc.arg(event_type))
  AND (CAST(sqlc.arg(any_time) AS SIGNED) = 1 OR failed_at >= sqlc.arg(failed_since))
ORDER BY failed_at, id
LIMIT ?;

-- name: MessageListFailedNewest :many
-- The same selection, most recently failed first, as on-call screens show them.
SELECT id, event_type, CAST(payload AS BINARY) AS payload, idempotency_key, attempts, max_attempts,
       CAST(last_error AS BINARY) AS last_error, created_at, failed_at
FROM outbox_messages
WHERE status = 'FAILED'
  AND (CAST(sqlc.arg(all_ids) AS SIGNED) = 1 OR id IN (sqlc.slice('ids')))
  AND (CAST(sqlc.arg(any_type) AS SIGNED) = 1 OR event_type = sqlc.arg(event_type))
  AND (CAST(sqlc.arg(any_time) AS SIGNED) = 1 OR failed_at >= sqlc.arg(failed_since))
ORDER BY failed_at DESC, id DESC
LIMIT ?;

-- name: MessageCountFailed :one
SELECT CAST(COUNT(*) AS SIGNED) AS n
FROM outbox_messages
WHERE status = 'FAILED'
  AND (CAST(sqlc.arg(all_ids) AS SIGNED) = 1 OR id IN (sqlc.slice('ids')))
  AND (CAST(sqlc.arg(any_type) AS SIGNED) = 1 OR event_type = sqlc.arg(event_type))
  AND (CAST(sqlc.arg(any_time) AS SIGNED) = 1 OR failed_at >= sqlc.arg(failed_since));

-- name: MessageRetryFailed :execrows
-- FAILED rows become PENDING, due now, with a fresh attempt budget. last_error is kept. It
-- moves one batch, in the claim index's order. Retry loops, with each batch its own READ
-- COMMITTED transaction. Retrying a million failures thus never holds a million row locks, nor
-- next-key locks that stall the workers' result writes. A moved row is no longer FAILED, so the
-- next batch takes the next rows.
UPDATE outbox_messages
SET status          = 'PENDING',
    attempts        = 0,
    next_attempt_at = TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()),
    failed_at       = NULL
WHERE status = 'FAILED'
  AND (CAST(sqlc.arg(all_ids) AS SIGNED) = 1 OR id IN (sqlc.slice('ids')))
  AND (CAST(sqlc.arg(any_type) AS SIGNED) = 1 OR event_type = sqlc.arg(event_type))
  AND (CAST(sqlc.arg(any_time) AS SIGNED) = 1 OR failed_at >= sqlc.arg(failed_since))
ORDER BY next_attempt_at, id
LIMIT ?;

-- name: MessageRetryFailedIDs :execrows
-- MessageRetryFailed for given ids, at most retryBatch at a time, by primary key. A scan of the
-- claim index would wait on any FAILED row another transaction holds.
UPDATE outbox_messages FORCE INDEX (PRIMARY)
SET status          = 'PENDING',
    attempts        = 0,
    next_attempt_at = TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()),
    failed_at       = NULL
WHERE status = 'FAILED'
  AND id IN (sqlc.slice('ids'))
  AND (CAST(sqlc.arg(any_type) AS SIGNED) = 1 OR event_type = sqlc.arg(event_type))
  AND (CAST(sqlc.arg(any_time) AS SIGNED) = 1 OR failed_at >= sqlc.arg(failed_since));

-- name: MessagePurgeSent :execrows
-- One small batch. The caller loops, so no statement holds many row locks for long. The scan
-- runs on the claim index, bounded by next_attempt_at. A row was due before it was claimed and
-- sent, so its next_attempt_at is never after its sent_at. The bound thus only stops the scan
-- at the cutoff instead of at the end of every retained SENT row. The ORDER BY is the index
-- order, oldest first, with no sort. It makes the statement deterministic for statement-based
-- binlogs.
DELETE FROM outbox_messages
WHERE status = 'SENT'
  AND next_attempt_at < TIMESTAMPADD(MICROSECOND, 0 - CAST(sqlc.arg(older_than_us) AS SIGNED), TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()))
  AND sent_at < TIMESTAMPADD(MICROSECOND, 0 - CAST(sqlc.arg(older_than_us) AS SIGNED), TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()))
ORDER BY next_attempt_at, id
LIMIT ?;

-- name: MessagePurgeFailed :execrows
-- As MessagePurgeSent. A FAILED row's next_attempt_at is never after its failed_at. A row made
-- FAILED by hand without failed_at counts as failed at its next_attempt_at.
DELETE FROM outbox_messages
WHERE status = 'FAILED'
  AND next_attempt_at < TIMESTAMPADD(MICROSECOND, 0 - CAST(sqlc.arg(older_than_us) AS SIGNED), TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()))
  AND COALESCE(failed_at, next_attempt_at) < TIMESTAMPADD(MICROSECOND, 0 - CAST(sqlc.arg(older_than_us) AS SIGNED), TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()))
ORDER BY next_attempt_at, id
LIMIT ?;

-- name: MessageCountPurgeSent :one
-- What MessagePurgeSent would delete, all batches together, for Purge's dry run. FORCE INDEX
-- makes it a range that stops at the cutoff. Left alone, the optimizer reads every SENT entry.
SELECT CAST(COUNT(*) AS SIGNED) AS n
FROM outbox_messages FORCE INDEX (outbox_messages_claim)
WHERE status = 'SENT'
  AND next_attempt_at < TIMESTAMPADD(MICROSECOND, 0 - CAST(sqlc.arg(older_than_us) AS SIGNED), TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()))
  AND sent_at < TIMESTAMPADD(MICROSECOND, 0 - CAST(sqlc.arg(older_than_us) AS SIGNED), TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()));

-- name: MessageCountPurgeFailed :one
-- What MessagePurgeFailed would delete, all batches together, for Purge's dry run.
SELECT CAST(COUNT(*) AS SIGNED) AS n
FROM outbox_messages FORCE INDEX (outbox_messages_claim)
WHERE status = 'FAILED'
  AND next_attempt_at < TIMESTAMPADD(MICROSECOND, 0 - CAST(sqlc.arg(older_than_us) AS SIGNED), TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()))
  AND COALESCE(failed_at, next_attempt_at) < TIMESTAMPADD(MICROSECOND, 0 - CAST(sqlc.arg(older_than_us) AS SIGNED), TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()));

-- name: MessageLockForPurge :many
-- Purge by id, step 1, in a READ COMMITTED transaction. It locks the given messages that have
-- this status, which Purge checks is SENT or FAILED. FORCE INDEX keeps it on the primary key, so
-- only these rows are locked. Left to itself, the optimizer scans the claim index, or the whole
-- table for many ids, and locks what it scans. A single-table DELETE takes no index hint, hence
-- two steps.
SELECT id FROM outbox_messages FORCE INDEX (PRIMARY)
WHERE status = sqlc.arg(status)
  AND id IN (sqlc.slice('ids'))
FOR UPDATE;

-- name: MessageDeleteLocked :execrows
-- Purge by id, step 2. It deletes the rows step 1 locked, in the same transaction, so their
-- status cannot change meanwhile. id IN alone plans on the primary key.
DELETE FROM outbox_messages
WHERE id IN (sqlc.slice('ids'));

-- name: MessageCountPurgeIDs :one
SELECT CAST(COUNT(*) AS SIGNED) AS n
FROM outbox_messages FORCE INDEX (PRIMARY)
WHERE status = sqlc.arg(status)
  AND id IN (sqlc.slice('ids'));

-- name: MessageGet :one
-- One message, whatever its state, for an operator's outbox.Inspect or outboxgen show.
SELECT id, event_type, CAST(payload AS BINARY) AS payload, idempotency_key, status, attempts, max_attempts, next_attempt_at,
       claimed_at, reclaim_after, claim_token, CAST(last_error AS BINARY) AS last_error, created_at, sent_at, failed_at, CAST(headers AS BINARY) AS headers, ordering_key
FROM outbox_messages
WHERE id = ?;
