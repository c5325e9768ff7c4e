-- Stats' read of retention's state (runtime/outbox/stats_sent.go).

-- name: StatsOldestSent :many
-- How long ago the SENT row due first was sent, in microseconds, as RetentionOldestSent, for
-- outbox.Stats: one index entry of the claim index, whatever the table holds. Stats never fails
-- because of one odd row: a SENT row without sent_at (changed by hand) counts from its
-- next_attempt_at, and a NULL age as 0.
SELECT CAST(COALESCE(TIMESTAMPDIFF(MICROSECOND, COALESCE(sent_at, next_attempt_at), TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP())), 0) AS SIGNED) AS age_us
FROM outbox_messages FORCE INDEX (outbox_messages_claim)
WHERE status = 'SENT'
ORDER BY next_attempt_at, id
LIMIT 1;
