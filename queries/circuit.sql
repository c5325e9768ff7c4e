-- Queries of the circuit per event type (runtime/outbox/circuit*.go) and of the failing types
-- that Stats reports from the table.

-- name: CircuitClockRead :one
-- The database clock, as the claim's NOW(6) reads it, to measure delivery lag on it.
SELECT TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()) AS db_now;

-- name: CircuitWaiting :one
-- The messages of a type waiting for delivery, claimed or not, for the log line of a circuit's
-- state change. It reads the PENDING and PROCESSING parts of the claim index, once per change.
SELECT COUNT(*) AS waiting
FROM outbox_messages
WHERE status IN ('PENDING', 'PROCESSING')
  AND event_type = sqlc.arg(event_type);

-- name: CircuitRetryingByType :many
-- Per event type, the PENDING rows that failed at least once and wait for a retry. It reads the PENDING part of the claim index, as Stats does.
SELECT event_type, COUNT(*) AS retrying
FROM outbox_messages
WHERE status = 'PENDING'
  AND attempts > 0
  AND last_error IS NOT NULL
GROUP BY event_type
ORDER BY event_type;

-- name: CircuitRecentSent :one
-- Whether a message of the type was sent within the window. A SENT row's next_attempt_at is at
-- or before its claim, so the read stays in the recent end of the SENT part of the claim index:
-- rows due within four windows, of which those sent within one count. A row that waited longer
-- than that for its claim is missed, and a backlog that old pages by its due age already.
SELECT CAST(EXISTS (
    SELECT 1
    FROM outbox_messages
    WHERE status = 'SENT'
      AND next_attempt_at >= TIMESTAMPADD(MICROSECOND, 0 - 4 * CAST(sqlc.arg(window_us) AS SIGNED), TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()))
      AND sent_at >= TIMESTAMPADD(MICROSECOND, 0 - CAST(sqlc.arg(window_us) AS SIGNED), TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()))
      AND event_type = sqlc.arg(event_type)
) AS SIGNED) AS recent;
