-- Cancel and run-now, the operator's writes on PENDING messages (outbox.Cancel,
-- outbox.RetryPending, `outboxgen cancel`, `outboxgen retry --pending`).

-- name: MessageCancelLock :many
-- Cancel, step 1, in a READ COMMITTED transaction: it locks the given messages that are still
-- PENDING or PROCESSING, by primary key only, so nothing else is locked. An empty event_type
-- means any type.
SELECT id, status, ordering_key
FROM outbox_messages FORCE INDEX (PRIMARY)
WHERE id IN (sqlc.slice('ids'))
  AND status IN ('PENDING', 'PROCESSING')
  AND (CAST(sqlc.arg(any_type) AS SIGNED) = 1 OR event_type = sqlc.arg(event_type))
ORDER BY id
FOR UPDATE;

-- name: MessageCancelPending :execrows
-- Cancel, step 2, on the rows step 1 locked. A PENDING row becomes CANCELLED, a terminal status
-- no claim reads.
UPDATE outbox_messages FORCE INDEX (PRIMARY)
SET status       = 'CANCELLED',
    cancelled_at = TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP())
WHERE status = 'PENDING'
  AND id IN (sqlc.slice('ids'));

-- name: MessageCancelRunning :execrows
-- Cancel, step 2 for PROCESSING rows. The handler's attempt goes on. The result write sees
-- cancelled_at and makes the row CANCELLED instead of PENDING again. A success is still SENT.
UPDATE outbox_messages FORCE INDEX (PRIMARY)
SET cancelled_at = TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP())
WHERE status = 'PROCESSING'
  AND cancelled_at IS NULL
  AND id IN (sqlc.slice('ids'));

-- name: MessageCancelCandidates :many
-- Cancel by event type: the next ids to cancel, PENDING ones in the claim index's order, then
-- the few PROCESSING ones not yet flagged. Cancelled rows leave PENDING, and flagged ones are
-- passed over, so the next batch reads the next rows.
SELECT id FROM outbox_messages
WHERE status = sqlc.arg(status)
  AND event_type = sqlc.arg(event_type)
  AND (status = 'PENDING' OR cancelled_at IS NULL)
ORDER BY next_attempt_at, id
LIMIT ?;

-- name: MessageCountCancel :one
-- What Cancel would change, for its dry run: PENDING rows, and PROCESSING rows not yet flagged.
SELECT CAST(COUNT(*) AS SIGNED) AS n
FROM outbox_messages
WHERE status IN ('PENDING', 'PROCESSING')
  AND (status = 'PENDING' OR cancelled_at IS NULL)
  AND (CAST(sqlc.arg(all_ids) AS SIGNED) = 1 OR id IN (sqlc.slice('ids')))
  AND (CAST(sqlc.arg(any_type) AS SIGNED) = 1 OR event_type = sqlc.arg(event_type));

-- name: OrderingQueueDeleteCancelled :execrows
-- The queue entries of these messages go when they are CANCELLED, so a cancelled head releases
-- its key to the key's next message. It has OrderingQueueDeleteSent's plan, for its reasons:
-- messages by primary key, then each entry by its whole primary key.
DELETE q
FROM outbox_messages m FORCE INDEX (PRIMARY)
STRAIGHT_JOIN outbox_ordering_queue q FORCE INDEX (PRIMARY)
  ON q.ordering_key = m.ordering_key AND q.seq = m.ordering_seq AND q.message_id = m.id
WHERE m.id IN (sqlc.slice('ids'))
  AND m.status = 'CANCELLED';

-- name: MessageRunPending :execrows
-- Run now: PENDING rows waiting for a backoff or a delay become due at once, by primary key.
-- attempts stays. An ordered row still waits for its key's head.
UPDATE outbox_messages FORCE INDEX (PRIMARY)
SET next_attempt_at = TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP())
WHERE status = 'PENDING'
  AND next_attempt_at > TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP())
  AND id IN (sqlc.slice('ids'))
  AND (CAST(sqlc.arg(any_type) AS SIGNED) = 1 OR event_type = sqlc.arg(event_type));

-- name: MessageRunPendingCandidates :many
-- Run now by event type or for every type: the next ids of PENDING rows due later, in the
-- claim index's order from a position, so each batch reads on from the last.
SELECT id, next_attempt_at FROM outbox_messages
WHERE status = 'PENDING'
  AND next_attempt_at > TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP())
  AND (CAST(sqlc.arg(any_type) AS SIGNED) = 1 OR event_type = sqlc.arg(event_type))
ORDER BY next_attempt_at, id
LIMIT ?;

-- name: MessageCountRunPending :one
SELECT CAST(COUNT(*) AS SIGNED) AS n
FROM outbox_messages
WHERE status = 'PENDING'
  AND next_attempt_at > TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP())
  AND (CAST(sqlc.arg(all_ids) AS SIGNED) = 1 OR id IN (sqlc.slice('ids')))
  AND (CAST(sqlc.arg(any_type) AS SIGNED) = 1 OR event_type = sqlc.arg(event_type));

-- name: MessagePurgeCancelled :execrows
-- As MessagePurgeFailed, for CANCELLED rows by cancelled_at. A row cancelled while delayed into
-- the future waits until that due time is also older than the cutoff, since the scan is bounded
-- by next_attempt_at.
DELETE FROM outbox_messages
WHERE status = 'CANCELLED'
  AND next_attempt_at < TIMESTAMPADD(MICROSECOND, 0 - CAST(sqlc.arg(older_than_us) AS SIGNED), TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()))
  AND COALESCE(cancelled_at, next_attempt_at) < TIMESTAMPADD(MICROSECOND, 0 - CAST(sqlc.arg(older_than_us) AS SIGNED), TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()))
ORDER BY next_attempt_at, id
LIMIT ?;

-- name: MessageCountPurgeCancelled :one
-- What MessagePurgeCancelled would delete, all batches together, for Purge's dry run.
SELECT CAST(COUNT(*) AS SIGNED) AS n
FROM outbox_messages FORCE INDEX (outbox_messages_claim)
WHERE status = 'CANCELLED'
  AND next_attempt_at < TIMESTAMPADD(MICROSECOND, 0 - CAST(sqlc.arg(older_than_us) AS SIGNED), TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()))
  AND COALESCE(cancelled_at, next_attempt_at) < TIMESTAMPADD(MICROSECOND, 0 - CAST(sqlc.arg(older_than_us) AS SIGNED), TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()));
