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
-- Whether a message of the type was sent lately. A SENT row's next_attempt_at is at or before
-- its claim, so a row found in the SENT part of the claim index within the window was sent in
-- it. It reads only that recent range, never the SENT history.
SELECT CAST(EXISTS (
    SELECT 1
    FROM outbox_messages
    WHERE status = 'SENT'
      AND next_attempt_at >= TIMESTAMPADD(MICROSECOND, 0 - CAST(sqlc.arg(window_us) AS SIGNED), TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()))
      AND event_type = sqlc.arg(event_type)
) AS SIGNED) AS recent;
