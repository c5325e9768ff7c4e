-- Schema version 4 -> 5: on-call control. The status ENUM gains CANCELLED, appended last with
-- the column's exact definition otherwise, and cancelled_at is added at the end. Both change
-- only metadata on MySQL 8.0+ and MariaDB 10.3+. The table outbox_pauses is new, so Migrate
-- creates it from schema.sql. MySQL does each change in place only on its own, and a COMMENT
-- never instantly, so they are three statements, the COMMENT last. An upgrade stopped between
-- them runs again: the ENUM change repeats harmlessly, and Migrate passes over the ADD COLUMN
-- of a column that exists. Workers of version 4 never write CANCELLED and never read
-- outbox_pauses, so they may keep running on these tables: min 4.
ALTER TABLE outbox_messages
    MODIFY COLUMN status ENUM('PENDING', 'PROCESSING', 'SENT', 'FAILED', 'CANCELLED') NOT NULL DEFAULT 'PENDING',
    ALGORITHM = INSTANT;
ALTER TABLE outbox_messages
    ADD COLUMN cancelled_at DATETIME(6) NULL,
    ALGORITHM = INSTANT;
ALTER TABLE outbox_messages COMMENT = 'outboxgen schema 5 min 4';
ALTER TABLE outbox_inbox COMMENT = 'outboxgen schema 5 min 4';
ALTER TABLE outbox_job_runs COMMENT = 'outboxgen schema 5 min 4';
ALTER TABLE outbox_ordering COMMENT = 'outboxgen schema 5 min 4';
ALTER TABLE outbox_ordering_queue COMMENT = 'outboxgen schema 5 min 4';
