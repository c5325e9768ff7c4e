-- Schema version 3 -> 4: per-key ordering. Two nullable columns at the end of outbox_messages
-- (instant where the server has it, as in 003); the tables outbox_ordering and
-- outbox_ordering_queue are new, so Migrate creates them from schema.sql.
ALTER TABLE outbox_messages
    ADD COLUMN ordering_key VARBINARY(191) NULL,
    ADD COLUMN ordering_seq BIGINT NULL,
    COMMENT = 'outboxgen schema 4',
    ALGORITHM = INSTANT;
ALTER TABLE outbox_inbox COMMENT = 'outboxgen schema 4';
ALTER TABLE outbox_job_runs COMMENT = 'outboxgen schema 4';
