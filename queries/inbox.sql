-- outbox_inbox: handler-side deduplication (outbox.Once).

-- name: InboxRecord :execrows
-- 1 row affected = first time; 0 = seen before (clientFoundRows is off, and the no-op update
-- changes nothing). ON DUPLICATE rather than INSERT IGNORE, which would also hide real errors
-- such as truncation.
INSERT INTO outbox_inbox (consumer, idem_key, processed_at)
VALUES (sqlc.arg(consumer), sqlc.arg(idem_key), TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()))
ON DUPLICATE KEY UPDATE consumer = consumer;
