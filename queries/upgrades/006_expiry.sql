-- Schema version 5 -> 6: Once keys that expire, and rate limits. outbox_inbox gains expires_at
-- at the end, in place, and an index on it, built online. The table outbox_rate_limits is new,
-- so Migrate creates it from schema.sql. MySQL does an ADD COLUMN in place only on its own, and
-- an index never instantly, so they are two statements, the COMMENTs last. An upgrade stopped
-- between them runs again: Migrate passes over the ADD COLUMN of a column that exists and the
-- ADD KEY of an index that exists. Workers of version 4 and 5 write no expires_at, which
-- retention reads as a key of theirs, and never read outbox_rate_limits, so they may keep
-- running on these tables: min 4.
ALTER TABLE outbox_inbox
    ADD COLUMN expires_at DATETIME(6) NULL,
    ALGORITHM = INSTANT;
ALTER TABLE outbox_inbox
    ADD KEY outbox_inbox_expires (expires_at),
    ALGORITHM = INPLACE, LOCK = NONE;
ALTER TABLE outbox_messages COMMENT = 'outboxgen schema 6 min 4';
ALTER TABLE outbox_inbox COMMENT = 'outboxgen schema 6 min 4';
ALTER TABLE outbox_job_runs COMMENT = 'outboxgen schema 6 min 4';
ALTER TABLE outbox_ordering COMMENT = 'outboxgen schema 6 min 4';
ALTER TABLE outbox_ordering_queue COMMENT = 'outboxgen schema 6 min 4';
ALTER TABLE outbox_pauses COMMENT = 'outboxgen schema 6 min 4';
