-- name: MessageCountFailedWithin :one
-- The on-call console's alert for new failures. It counts FAILED messages whose failed_at is
-- within the last window_us microseconds of the database clock. failed_at is written on that
-- clock, so the cutoff is computed there too. A process whose own clock is off thus still
-- counts a failure of a minute ago. Like MessageCountFailed, it reads the FAILED rows through
-- the claim index's status prefix.
SELECT CAST(COUNT(*) AS SIGNED) AS n
FROM outbox_messages
WHERE status = 'FAILED'
  AND failed_at >= TIMESTAMPADD(MICROSECOND, 0 - CAST(sqlc.arg(window_us) AS SIGNED),
                                TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()));
