-- outbox_inbox holds the handler-side deduplication of outbox.Once.

-- name: InboxInsert :exec
-- A plain INSERT. A duplicate consumer and idem_key fails with error 1062, which Once reads as
-- "seen before". In InnoDB the duplicate-key error rolls back this statement only, never the
-- caller's transaction. ON DUPLICATE KEY UPDATE would not do. Its RowsAffected depends on the
-- DSN's clientFoundRows, which reports 1 for a row found as well as for a row inserted. INSERT
-- IGNORE would not do either, since it would also hide real errors such as truncation.
INSERT INTO outbox_inbox (consumer, idem_key, processed_at)
VALUES (sqlc.arg(consumer), sqlc.arg(idem_key), TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()));
