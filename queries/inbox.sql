-- outbox_inbox: handler-side deduplication (outbox.Once).

-- name: InboxInsert :exec
-- A plain INSERT: a duplicate (consumer, idem_key) fails with error 1062, which Once reads as
-- "seen before". The duplicate-key error rolls back this statement only, never the caller's
-- transaction (InnoDB). Not ON DUPLICATE KEY UPDATE with RowsAffected: its 0-or-1 depends on
-- the DSN's clientFoundRows, which reports 1 for a row found as well as for a row inserted. Not
-- INSERT IGNORE, which would also hide real errors such as truncation.
INSERT INTO outbox_inbox (consumer, idem_key, processed_at)
VALUES (sqlc.arg(consumer), sqlc.arg(idem_key), TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()));
