-- Schema version 2 -> 3: message headers (outbox.Header, the trace context). Adding a column at
-- the end is instant on MySQL 8.0.12+ and MariaDB 10.3+ (no copy, no lock beyond a moment's
-- metadata lock); Migrate asks for ALGORITHM=INSTANT and, where a server refuses it, runs the
-- same statement with the server's default algorithm. The other two tables only record the
-- version.
ALTER TABLE outbox_messages
    ADD COLUMN headers TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    COMMENT = 'outboxgen schema 3',
    ALGORITHM = INSTANT;
ALTER TABLE outbox_inbox COMMENT = 'outboxgen schema 3';
ALTER TABLE outbox_job_runs COMMENT = 'outboxgen schema 3';
