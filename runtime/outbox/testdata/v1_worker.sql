-- The first release's worker statements (schema version 1), frozen for
-- TestMigrateUpgradesV1InPlace, which runs a version-1 worker through the upgrade. Copied
-- verbatim from sqlc's output in runtime/internal/store/messages.sql.go at commit 2ccae4e
-- (a920b78^, the last commit at schema version 1, whose queries/schema.sql is
-- testdata/schema_v1.sql); their source is queries/messages.sql of that commit. What the
-- release's Enqueue wrote (MessageInsert), its claim (MessageClaimCandidates, then
-- MessageClaimLockIDs, then MessageClaimMark, in one READ COMMITTED transaction) and its fenced
-- result writes (MessageMarkSent, MessageMarkRetry, MessageMarkFailed). A `/*SLICE:name*/?` is
-- one `?` per element, as sqlc's generated code expands it. Do not edit: a released worker's
-- SQL does not change.

-- name: MessageInsert :execlastid
INSERT INTO outbox_messages (
    event_type, payload, idempotency_key, status, attempts, max_attempts, next_attempt_at, created_at
) VALUES (
    ?, ?, ?, 'PENDING', 0, ?,
    TIMESTAMPADD(MICROSECOND, CAST(? AS SIGNED), TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP())), TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP())
);

-- name: MessageClaimCandidates :many
SELECT id, next_attempt_at
FROM outbox_messages
WHERE status = 'PENDING'
  AND (next_attempt_at > ? OR (next_attempt_at = ? AND id > ?))
  AND next_attempt_at <= TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP())
  AND event_type IN (/*SLICE:event_types*/?)
ORDER BY next_attempt_at, id
LIMIT ?;

-- name: MessageClaimLockIDs :many
SELECT id, event_type, payload, idempotency_key, attempts, max_attempts, created_at, next_attempt_at
FROM outbox_messages FORCE INDEX (PRIMARY)
WHERE id IN (/*SLICE:ids*/?)
  AND status = 'PENDING'
  AND next_attempt_at <= TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP())
  AND event_type IN (/*SLICE:event_types*/?)
ORDER BY id
LIMIT ?
FOR UPDATE SKIP LOCKED;

-- name: MessageClaimMark :execrows
UPDATE outbox_messages
SET status        = 'PROCESSING',
    attempts      = attempts + 1,
    claimed_at    = TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()),
    reclaim_after = TIMESTAMPADD(MICROSECOND, CAST(? AS SIGNED), TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP())),
    claim_token   = ?
WHERE status = 'PENDING'
  AND id IN (/*SLICE:ids*/?);

-- name: MessageMarkSent :execrows
UPDATE outbox_messages FORCE INDEX (PRIMARY)
SET status  = 'SENT',
    sent_at = TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP())
WHERE status = 'PROCESSING'
  AND claim_token = ?
  AND id IN (/*SLICE:ids*/?);

-- name: MessageMarkRetry :execrows
UPDATE outbox_messages FORCE INDEX (PRIMARY)
SET status          = 'PENDING',
    next_attempt_at = TIMESTAMPADD(MICROSECOND, CAST(? AS SIGNED), TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP())),
    last_error      = ?
WHERE id = ?
  AND status = 'PROCESSING'
  AND claim_token = ?;

-- name: MessageMarkFailed :execrows
UPDATE outbox_messages FORCE INDEX (PRIMARY)
SET status     = 'FAILED',
    failed_at  = TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()),
    last_error = ?
WHERE id = ?
  AND status = 'PROCESSING'
  AND claim_token = ?;
