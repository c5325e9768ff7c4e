-- Retention of the keys outbox.Once records (runtime/outbox/inbox_expiry_clean.go), run by the
-- worker that holds the cleaning lock (retention.sql), in READ COMMITTED transactions: no gap
-- locks, so a Once inserting a key beside the range waits for nothing.

-- name: RetentionDeleteExpiredKeys :execrows
-- One batch of expired keys, oldest expiry first: a range of outbox_inbox_expires below now,
-- where no key of a handler still inside its window lies. The order is total (the index
-- holds the primary key after expires_at), so the statement is deterministic for replication.
-- NULL (a key of an older worker) sorts first, and the condition leaves it to
-- RetentionDeleteOldKeys.
DELETE FROM outbox_inbox
WHERE expires_at IS NOT NULL
  AND expires_at < TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP())
ORDER BY expires_at, consumer, idem_key
LIMIT ?;

-- name: RetentionDeleteOldKeys :execrows
-- One batch of the keys workers older than schema version 6 wrote, without expires_at: those
-- whose processed_at is older than older_than_us. They are the NULL entries of
-- outbox_inbox_expires, read in that index's order; they stop coming once every worker is of
-- version 6 or later.
DELETE FROM outbox_inbox
WHERE expires_at IS NULL
  AND processed_at < TIMESTAMPADD(MICROSECOND, 0 - CAST(sqlc.arg(older_than_us) AS SIGNED), TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()))
ORDER BY expires_at, consumer, idem_key
LIMIT ?;
