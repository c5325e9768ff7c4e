-- outbox.Migrate and the start-up checks.

-- name: MigrateLock :one
-- Migrations of one database take turns, so two processes starting at once do not both ALTER.
-- A named lock is server-wide, so the name is per database. It has at most 64 characters,
-- MySQL's limit. 1 means acquired. 0 means another migration still runs after the wait. -1
-- means NULL, an error.
SELECT CAST(COALESCE(GET_LOCK(CONCAT('outboxgen.migrate.', LEFT(SHA2(COALESCE(DATABASE(), ''), 256), 40)),
                              CAST(sqlc.arg(timeout_s) AS SIGNED)), -1) AS SIGNED) AS acquired;

-- name: MigrateUnlock :one
SELECT CAST(COALESCE(RELEASE_LOCK(CONCAT('outboxgen.migrate.', LEFT(SHA2(COALESCE(DATABASE(), ''), 256), 40))), -1) AS SIGNED) AS released;

-- name: ServerBinlog :one
-- With the binary log on and binlog_format=STATEMENT, every write of a READ COMMITTED
-- transaction fails with error 1665. The claim and the result writes are such writes.
SELECT CAST(@@log_bin AS SIGNED) AS log_bin, CONCAT(@@SESSION.binlog_format) AS binlog_format;

-- name: SchemaProbe :one
-- NewWorker's check that outbox_messages exists and has the newest columns. Those are the
-- headers of schema version 3 and the ordering key and seq of version 4. It is a primary-key
-- probe that reads no row. Error 1146 or 1054 means Migrate must run.
SELECT CAST(COUNT(*) AS SIGNED) AS n FROM outbox_messages
WHERE id = 0 AND headers IS NULL AND ordering_key IS NULL AND ordering_seq IS NULL;
