-- Queries on outbox_messages, compiled by sqlc into runtime/internal/store.
--
-- The clock: every status time comes from the database (UTC, microseconds), never the app, so
-- instances with skewed clocks agree. UTC_TIMESTAMP(6) is what we mean, but sqlc v1.31.1 only
-- knows UTC_TIMESTAMP() without a precision ("function utc_timestamp(unknown) does not exist"),
-- and NOW(6) follows the session time_zone. So it is spelled
--     TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP())
-- which is exactly UTC_TIMESTAMP(6): NOW and UTC_TIMESTAMP both read the statement's start time,
-- and time-zone offsets are whole seconds, so NOW(6)'s microseconds are UTC's microseconds.
--
-- Every write after a claim is fenced on (id, status='PROCESSING', claim_token): a worker
-- reclaimed under can never overwrite the new owner's result, and RowsAffected (clientFoundRows
-- off) says whether the write landed. The result writes FORCE INDEX (PRIMARY): left to itself
-- the optimizer may plan them on a status index, and under REPEATABLE READ that takes next-key
-- locks across every PROCESSING row and the gap where new PENDING rows go, blocking other
-- workers' writes and the application's enqueues (TestResultWriteLocksOnlyItsOwnRows). By
-- primary key they lock exactly their own rows.

-- name: ClockNow :one
-- The connection check scans this into a time.Time: it fails without parseTime=true, and its
-- Location says whether loc=UTC.
SELECT TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()) AS now;

-- name: MessageInsert :execlastid
-- One INSERT per enqueue, on the caller's transaction. created_at and next_attempt_at both come
-- from the database clock (UTC_TIMESTAMP is constant within one statement). IFNULL: under
-- MariaDB's sql_mode EMPTY_STRING_IS_NULL, an empty key sent as an argument arrives as NULL.
-- CAST(... AS BINARY): a text argument is taken in the connection's charset, so a DSN with
-- charset=utf8 or latin1 would refuse or mangle an emoji; a binary string goes into the utf8mb4
-- column as the bytes it is (Enqueue checks they are UTF-8). Every read of payload, headers and
-- last_error casts to binary for the same reason, in the other direction.
INSERT INTO outbox_messages (
    event_type, payload, idempotency_key, headers, ordering_key, ordering_seq, status, attempts, max_attempts, next_attempt_at, created_at
) VALUES (
    sqlc.arg(event_type), CAST(sqlc.arg(payload) AS BINARY), IFNULL(sqlc.arg(idempotency_key), x''), CAST(sqlc.narg(headers) AS BINARY),
    sqlc.narg(ordering_key), sqlc.narg(ordering_seq), 'PENDING', 0, sqlc.arg(max_attempts),
    TIMESTAMPADD(MICROSECOND, CAST(sqlc.arg(delay_us) AS SIGNED), TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP())), TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP())
);

-- name: MessageInsertNow :execlastid
-- MessageInsert for the usual message: no ordering key, no delay. Only the columns without a
-- default, and no delay arithmetic: each expression the server evaluates shows in the enqueue's
-- cost (bench/cmd/w1cost --spellings; BENCHMARKS.md).
INSERT INTO outbox_messages (
    event_type, payload, idempotency_key, headers, max_attempts, next_attempt_at, created_at
) VALUES (
    sqlc.arg(event_type), CAST(sqlc.arg(payload) AS BINARY), IFNULL(sqlc.arg(idempotency_key), x''), CAST(sqlc.narg(headers) AS BINARY), sqlc.arg(max_attempts),
    TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()), TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP())
);

-- name: MessageInsertClaimed :execlastid
-- InTx's handoff (handoff.go): the same INSERT, but the row is born claimed by a worker of the
-- enqueuing process, exactly as MessageClaimMark would leave it (PROCESSING, attempts 1, a lease
-- and a claim token), so no claim transaction is needed: after the commit the worker dispatches
-- it straight from memory. Until then no other worker can claim it (it is not PENDING) and if
-- the process dies first, the lease expires and the reclaim makes it PENDING again.
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
-- Step 1 of the claim, inside a READ COMMITTED transaction: up to 2n due rows of the router's
-- types after the position (after_due, after_id), by a plain consistent read that locks nothing.
-- The ORDER BY is exactly the index order (status, next_attempt_at, id): no filesort. The
-- position is where the previous window ended when other claims held its rows (rows may share
-- a next_attempt_at: Retry and reclaim give whole batches one), and, while a backlog drains,
-- where the worker's last claim ended: every claimed row leaves a delete-marked entry at the
-- front of the index until InnoDB's purge removes it. The worker still scans from the start
-- often (see claimLoop).
-- An ordered row (ordering_key set) is a candidate only as its key's head: the smallest seq in
-- outbox_ordering_queue, i.e. every message of the key before it was sent. This is checked here,
-- by a non-locking read, and not in the locking step: a locking read that skips locked rows
-- would skip a locked predecessor and take its successor for a head. Being the head is stable
-- (seqs are handed out in commit order and a sent message never comes back), so the check
-- cannot go stale before the lock. Unordered rows pay one IS NULL test.
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
-- Step 2, same transaction: lock up to n of the candidates by primary key, skipping rows another
-- claimer holds, and recheck under the lock that each is still PENDING, due and of our types
-- (a locking read sees the latest committed row). Locking through the primary key is what makes
-- this cheap: a locking read through the claim index costs about twice both steps together
-- (BENCHMARKS.md). A transaction's own locks are not skipped: the worker never passes
-- ids it already holds.
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
-- Step 2 when other claims held every candidate window (a claim left open by a hung worker, or
-- many workers at once): lock due rows straight from the claim index, SKIP LOCKED passing over
-- held rows wherever they are. Slower (see MessageClaimLockIDs), so only the fallback. The
-- ORDER BY is exactly the index order: any other order adds a filesort and the first claimer
-- locks every candidate (docs/design.md, "The claim"). It returns rows this claim already holds too.
-- Ordered rows never: whether one is its key's head is a non-locking read (see
-- MessageClaimCandidates), so they are claimed through the candidates only.
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
-- The claim's last statement, same transaction: the lease (reclaim_after) lives on the row.
-- FORCE INDEX (PRIMARY), as in the result writes: without it a server may choose a range scan of
-- the claim index by its status prefix, which locks (and waits for) rows that other claims hold
-- (seen on MariaDB 11.8: a claim waited on rows an open claim held).
UPDATE outbox_messages FORCE INDEX (PRIMARY)
SET status        = 'PROCESSING',
    attempts      = attempts + 1,
    claimed_at    = TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()),
    reclaim_after = TIMESTAMPADD(MICROSECOND, CAST(sqlc.arg(lease_us) AS SIGNED), TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP())),
    claim_token   = sqlc.arg(claim_token)
WHERE status = 'PENDING'
  AND id IN (sqlc.slice('ids'));

-- name: MessageMarkSent :execrows
-- Fenced, for a whole claim's successes at once. claim_token stays on the row: it records which
-- claim delivered the message.
UPDATE outbox_messages FORCE INDEX (PRIMARY)
SET status  = 'SENT',
    sent_at = TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP())
WHERE status = 'PROCESSING'
  AND claim_token = sqlc.arg(claim_token)
  AND id IN (sqlc.slice('ids'));

-- name: MessageMarkRetry :execrows
-- Fenced: back to PENDING after a backoff computed in Go (b to 1.5b, b = initial * 2^(n-1), capped at max) and applied in SQL.
UPDATE outbox_messages FORCE INDEX (PRIMARY)
SET status          = 'PENDING',
    next_attempt_at = TIMESTAMPADD(MICROSECOND, CAST(sqlc.arg(delay_us) AS SIGNED), TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP())),
    last_error      = sqlc.arg(last_error)
WHERE id = sqlc.arg(id)
  AND status = 'PROCESSING'
  AND claim_token = sqlc.arg(claim_token);

-- name: MessageGiveBack :execrows
-- Fenced: a claimed row whose handler never ran (a prefetched row that waited too long for a
-- slot, or the worker shut down first), or was cut off by the shutdown deadline, goes back to
-- PENDING, due at once, and gets its claim's attempt back: it was not a real attempt. last_error
-- keeps the previous real failure.
UPDATE outbox_messages FORCE INDEX (PRIMARY)
SET status          = 'PENDING',
    attempts        = GREATEST(attempts, 1) - 1,
    next_attempt_at = TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP())
WHERE id = sqlc.arg(id)
  AND status = 'PROCESSING'
  AND claim_token = sqlc.arg(claim_token);

-- name: MessageMarkFailed :execrows
-- Fenced: permanent error, attempts exhausted or undecodable payload.
UPDATE outbox_messages FORCE INDEX (PRIMARY)
SET status     = 'FAILED',
    failed_at  = TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()),
    last_error = sqlc.arg(last_error)
WHERE id = sqlc.arg(id)
  AND status = 'PROCESSING'
  AND claim_token = sqlc.arg(claim_token);

-- name: MessageTokensByIDs :many
-- After a fenced batch landed partly: which rows no longer carry our claim (refused writes).
SELECT id, status, claim_token
FROM outbox_messages
WHERE id IN (sqlc.slice('ids'));

-- name: MessageReclaimStale :execrows
-- Leases that expired: the claiming worker died or hung. Back to PENDING, or FAILED when the
-- attempts are exhausted (attempts already counted the claim, so reclaim adds none and a message
-- that kills its worker cannot loop forever). Assignments run left to right and see earlier
-- ones, so every IF tests attempts/max_attempts, which this statement does not change.
-- last_error says so either way (a crash or a hang left no trace on the row otherwise), and
-- keeps the start of the previous error, the handler's own, after it. Its empty strings are hex
-- literals: MariaDB's sql_mode EMPTY_STRING_IS_NULL makes an empty quoted string NULL, and with
-- it the whole CONCAT.
UPDATE outbox_messages
SET status          = IF(attempts >= max_attempts, 'FAILED', 'PENDING'),
    failed_at       = IF(attempts >= max_attempts, TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()), failed_at),
    last_error      = CONCAT('lease expired (claim ', COALESCE(claim_token, x''), '): its worker died or its handler outlived the lease',
                         IF(attempts >= max_attempts, '; attempts exhausted', '; reclaimed for another attempt'),
                         COALESCE(CONCAT('; the error before: ', LEFT(last_error, 2000)), x'')),
    next_attempt_at = TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP())
WHERE status = 'PROCESSING'
  AND reclaim_after < TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP())
LIMIT ?;

-- name: MessageCountStuck :one
-- Stuck = PROCESSING for more than 3x its own lease: nobody is reclaiming it.
SELECT CAST(COUNT(*) AS SIGNED) AS stuck
FROM outbox_messages
WHERE status = 'PROCESSING'
  AND TIMESTAMPDIFF(MICROSECOND, claimed_at, TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()))
      > 3 * TIMESTAMPDIFF(MICROSECOND, claimed_at, reclaim_after);

-- name: MessageStatsByType :many
-- Never counts SENT rows: that part of the table grows without bound. oldest_due_us is how long
-- the longest-waiting due row has been claimable (now - next_attempt_at): unlike the pending age
-- it ignores delayed and backed-off rows, so it grows only when nobody claims. An ordered row
-- waiting behind its key's head is pending but not due (it cannot be claimed yet): a held key
-- is reported as such (OrderingHeldKeys), not as a dead fleet. Every SUM is COALESCEd: a
-- condition on a NULL (an ordered row without a queue entry has no head seq to compare, a row
-- made PROCESSING by hand may lack its lease) is NULL, and a group of only such rows would sum
-- to NULL and fail the whole query, for every type.
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
       CAST(COALESCE(MAX(IF(m.status = 'PENDING', TIMESTAMPDIFF(MICROSECOND, m.created_at, TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP())), NULL)), 0) AS SIGNED) AS oldest_pending_us,
       CAST(COALESCE(MAX(IF(m.status = 'PENDING' AND m.next_attempt_at <= TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP())
                             AND (m.ordering_key IS NULL OR m.ordering_seq = (SELECT MIN(q.seq) FROM outbox_ordering_queue q WHERE q.ordering_key = m.ordering_key)),
                            TIMESTAMPDIFF(MICROSECOND, m.next_attempt_at, TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP())), NULL)), 0) AS SIGNED) AS oldest_due_us
FROM outbox_messages m
WHERE m.status IN ('PENDING', 'PROCESSING', 'FAILED')
GROUP BY m.event_type
ORDER BY m.event_type;

-- name: MessageListFailed :many
-- Filters: all_ids (no id filter) or id IN ids; event_type '' = any; failed_since NULL = any.
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
-- The same selection, most recently failed first (on-call screens show the newest).
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
-- FAILED -> PENDING, due now, with a fresh attempt budget. last_error is kept as history. One
-- batch, in the claim index's order; Retry loops (each batch its own READ COMMITTED
-- transaction), so retrying a million failures never holds a million row locks, nor next-key
-- locks that stall the workers' result writes. A moved row is no longer FAILED, so the next
-- batch takes the next rows.
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
-- MessageRetryFailed for given ids (Retry sends at most retryBatch at a time), by primary key:
-- scanning the claim index instead, it would wait on any FAILED row another transaction holds.
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
-- One small batch; the caller loops so no statement holds many row locks for long. The scan runs
-- on the claim index, bounded by next_attempt_at: a row was due before it was claimed and sent,
-- so its next_attempt_at is never after its sent_at, and the bound only stops the scan at the
-- cutoff instead of at the end of every retained SENT row (50,000 index reads to delete 999
-- without it; 1,000 with it). The ORDER BY is the index order (no sort; the oldest first) and
-- makes the statement deterministic for statement-based binlogs.
DELETE FROM outbox_messages
WHERE status = 'SENT'
  AND next_attempt_at < TIMESTAMPADD(MICROSECOND, 0 - CAST(sqlc.arg(older_than_us) AS SIGNED), TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()))
  AND sent_at < TIMESTAMPADD(MICROSECOND, 0 - CAST(sqlc.arg(older_than_us) AS SIGNED), TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()))
ORDER BY next_attempt_at, id
LIMIT ?;

-- name: MessagePurgeFailed :execrows
-- As MessagePurgeSent: a FAILED row's next_attempt_at is never after its failed_at. A row made
-- FAILED by hand without failed_at counts as failed at its next_attempt_at.
DELETE FROM outbox_messages
WHERE status = 'FAILED'
  AND next_attempt_at < TIMESTAMPADD(MICROSECOND, 0 - CAST(sqlc.arg(older_than_us) AS SIGNED), TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()))
  AND COALESCE(failed_at, next_attempt_at) < TIMESTAMPADD(MICROSECOND, 0 - CAST(sqlc.arg(older_than_us) AS SIGNED), TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()))
ORDER BY next_attempt_at, id
LIMIT ?;

-- name: MessageCountPurgeSent :one
-- What MessagePurgeSent would delete, all batches together (Purge's dry run). FORCE INDEX makes
-- it a range that stops at the cutoff: left alone, the optimizer reads every SENT entry (ref on
-- status).
SELECT CAST(COUNT(*) AS SIGNED) AS n
FROM outbox_messages FORCE INDEX (outbox_messages_claim)
WHERE status = 'SENT'
  AND next_attempt_at < TIMESTAMPADD(MICROSECOND, 0 - CAST(sqlc.arg(older_than_us) AS SIGNED), TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()))
  AND sent_at < TIMESTAMPADD(MICROSECOND, 0 - CAST(sqlc.arg(older_than_us) AS SIGNED), TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()));

-- name: MessageCountPurgeFailed :one
-- What MessagePurgeFailed would delete, all batches together (Purge's dry run).
SELECT CAST(COUNT(*) AS SIGNED) AS n
FROM outbox_messages FORCE INDEX (outbox_messages_claim)
WHERE status = 'FAILED'
  AND next_attempt_at < TIMESTAMPADD(MICROSECOND, 0 - CAST(sqlc.arg(older_than_us) AS SIGNED), TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()))
  AND COALESCE(failed_at, next_attempt_at) < TIMESTAMPADD(MICROSECOND, 0 - CAST(sqlc.arg(older_than_us) AS SIGNED), TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()));

-- name: MessageLockForPurge :many
-- Purge by id, step 1, in a READ COMMITTED transaction: lock the given messages that have this
-- status (SENT or FAILED; Purge checks). By primary key (FORCE INDEX: left to itself the
-- optimizer scans the claim index, or the whole table for many ids, and locks what it scans),
-- so only these rows are locked. A single-table DELETE takes no index hint, hence two steps.
SELECT id FROM outbox_messages FORCE INDEX (PRIMARY)
WHERE status = sqlc.arg(status)
  AND id IN (sqlc.slice('ids'))
FOR UPDATE;

-- name: MessageDeleteLocked :execrows
-- Purge by id, step 2: delete the rows step 1 locked, in the same transaction (their status
-- cannot change meanwhile). id IN alone plans on the primary key.
DELETE FROM outbox_messages
WHERE id IN (sqlc.slice('ids'));

-- name: MessageCountPurgeIDs :one
SELECT CAST(COUNT(*) AS SIGNED) AS n
FROM outbox_messages FORCE INDEX (PRIMARY)
WHERE status = sqlc.arg(status)
  AND id IN (sqlc.slice('ids'));

-- name: MessageGet :one
-- One message, whatever its state, for an operator (outbox.Inspect, outboxgen show).
SELECT id, event_type, CAST(payload AS BINARY) AS payload, idempotency_key, status, attempts, max_attempts, next_attempt_at,
       claimed_at, reclaim_after, claim_token, CAST(last_error AS BINARY) AS last_error, created_at, sent_at, failed_at, CAST(headers AS BINARY) AS headers, ordering_key
FROM outbox_messages
WHERE id = ?;
