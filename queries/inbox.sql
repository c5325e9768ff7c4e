-- outbox_inbox holds the handler-side deduplication of outbox.Once.

-- name: InboxInsert :exec
-- A plain INSERT. A duplicate consumer and idem_key fails with error 1062, which Once reads as
-- "seen before". In InnoDB the duplicate-key error rolls back this statement only, never the
-- caller's transaction. ON DUPLICATE KEY UPDATE would not do. Its RowsAffected depends on the
-- DSN's clientFoundRows, which reports 1 for a row found as well as for a row inserted. INSERT
-- IGNORE would not do either, since it would also hide real errors such as truncation.
-- expires_at is processed_at plus keep_us (inbox_expiry.go). A negative keep_us (KeepForever),
-- or one past DATETIME's range, where TIMESTAMPADD gives NULL, stores the largest DATETIME: a
-- NULL would read as a key of an older worker, which retention deletes after a week.
INSERT INTO outbox_inbox (consumer, idem_key, processed_at, expires_at)
VALUES (sqlc.arg(consumer), sqlc.arg(idem_key), TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()),
        COALESCE(IF(CAST(sqlc.arg(keep_us) AS SIGNED) < 0, NULL,
                    TIMESTAMPADD(MICROSECOND, CAST(sqlc.arg(keep_us) AS SIGNED), TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()))),
                 CAST('9999-12-31 23:59:59.999999' AS DATETIME(6))));
