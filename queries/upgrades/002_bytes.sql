-- Schema version 1 -> 2: identifiers compare as bytes on every server, and payloads come back
-- byte for byte (MySQL's JSON type rewrote them). Each table's statement also records the new
-- version in its COMMENT, in the same DDL, so a table is either upgraded and marked or neither.
-- Changing a column's type copies the table on MySQL and MariaDB alike (no online DDL exists for
-- it): reads go on, writes to the table wait until the copy ends. Values keep their bytes:
-- VARCHAR(191) in utf8mb4 holds at most 764 bytes, which is what the inbox and job columns get.
ALTER TABLE outbox_messages
    MODIFY event_type VARBINARY(191) NOT NULL,
    MODIFY payload LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    MODIFY idempotency_key VARBINARY(191) NOT NULL DEFAULT x'',
    MODIFY claim_token VARBINARY(32) NULL,
    COMMENT = 'outboxgen schema 2';
ALTER TABLE outbox_inbox
    MODIFY consumer VARBINARY(764) NOT NULL,
    MODIFY idem_key VARBINARY(764) NOT NULL,
    COMMENT = 'outboxgen schema 2';
ALTER TABLE outbox_job_runs
    MODIFY job VARBINARY(764) NOT NULL,
    COMMENT = 'outboxgen schema 2';
