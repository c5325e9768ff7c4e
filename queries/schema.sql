-- The tables of outboxgen (github.com/outboxgen/outboxgen), as `outboxgen schema` prints them:
-- save this as a migration (goose, atlas, golang-migrate), or let outbox.Migrate create the
-- tables that are missing. Every time column is written from the database clock
-- (UTC_TIMESTAMP(6)), never the application's.
--
-- Schema version 4 (each table's COMMENT records it; outbox.Migrate and `outboxgen schema
-- --upgrade` bring tables of earlier versions up to it: queries/upgrades/). A COMMENT of
-- 'outboxgen schema N min M' lets workers of version M and later run on the table; without min,
-- only version N and later. What is compared as an identifier (event
-- types, keys, consumers, job names, tokens) is VARBINARY: byte comparison on every server, where
-- the default collations are case- and accent-blind and MariaDB's _bin ones ignore trailing
-- spaces. The payload is text with a binary collation, so it comes back byte for byte (MySQL's JSON
-- type reorders keys and rewrites numbers) and JSON_VALUE(payload, '$.field') still works on
-- every server; the runtime checks that it is valid JSON and UTF-8 before the INSERT. Empty
-- defaults are written x'' because MariaDB's sql_mode EMPTY_STRING_IS_NULL turns '' into NULL.

CREATE TABLE IF NOT EXISTS outbox_messages (
    id              BIGINT       NOT NULL AUTO_INCREMENT,
    -- The wire name from events.yaml; never derived from Go names.
    event_type      VARBINARY(191) NOT NULL,
    -- JSON, validated before the INSERT; at most outbox.MaxPayloadBytes.
    payload         LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    -- Indexed, not unique: enqueueing the same logical event twice is legal; handlers deduplicate.
    idempotency_key VARBINARY(191) NOT NULL DEFAULT x'',
    status          ENUM('PENDING', 'PROCESSING', 'SENT', 'FAILED') NOT NULL DEFAULT 'PENDING',
    -- Claims so far (a reclaim does not add one: the claim already counted).
    attempts        INT          NOT NULL DEFAULT 0,
    -- Resolved at enqueue from the event's policy.
    max_attempts    INT          NOT NULL,
    next_attempt_at DATETIME(6)  NOT NULL,
    claimed_at      DATETIME(6)  NULL,
    -- claimed_at + the claiming worker's StaleAfter: the lease lives on the row, so workers with
    -- different StaleAfter share the table and Stats needs no worker config.
    reclaim_after   DATETIME(6)  NULL,
    -- Fresh per claim; every write after the claim is fenced on (id, PROCESSING, claim_token).
    claim_token     VARBINARY(32) NULL,
    last_error      TEXT         NULL,
    created_at      DATETIME(6)  NOT NULL,
    sent_at         DATETIME(6)  NULL,
    failed_at       DATETIME(6)  NULL,
    -- Message headers as a JSON object of strings (outbox.Header; the trace context), written
    -- once at enqueue; NULL when there are none. Since schema version 3.
    headers         TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    -- Ordered events only (events.yaml ordering_key): the key (group-prefixed, opaque) and the
    -- message's place in its key's commit order (outbox_ordering); NULL for unordered events,
    -- which therefore pay no index entry for them. Since schema version 4.
    ordering_key    VARBINARY(191) NULL,
    ordering_seq    BIGINT       NULL,
    PRIMARY KEY (id),
    -- Serves the claim: WHERE status='PENDING' AND next_attempt_at <= now ORDER BY next_attempt_at, id.
    -- Its status prefix also serves everything else that selects by status: the reclaim and the
    -- stale/stuck counts (PROCESSING rows are the few in flight), Purge (SENT, FAILED) and the
    -- FAILED listings. It is deliberately the only index with status in it: an index entry
    -- changes whenever its columns do, so every status-prefixed index costs a delete-mark and an
    -- insert on every claim and every result. One status-prefixed index instead of four
    -- makes a drain faster (BenchmarkDrain; BENCHMARKS.md).
    KEY outbox_messages_claim (status, next_attempt_at, id),
    -- For people: "was the message for this key sent?" Written once at enqueue, never changed.
    KEY outbox_messages_idempotency_key (idempotency_key)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COMMENT = 'outboxgen schema 4';

-- outbox.Once: a handler records (consumer, key) in its own transaction; the PRIMARY KEY makes
-- the second insert a no-op, so the handler's DB effects happen at most once.
CREATE TABLE IF NOT EXISTS outbox_inbox (
    -- 764 bytes: the 191 characters of version 1's VARCHAR(191) in utf8mb4, so no key shrinks.
    consumer     VARBINARY(764) NOT NULL,
    idem_key     VARBINARY(764) NOT NULL,
    processed_at DATETIME(6)  NOT NULL,
    PRIMARY KEY (consumer, idem_key)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COMMENT = 'outboxgen schema 4';

-- mysqllock run ledger: a job that must run once per period writes (job, period_start) after
-- it succeeds; an instance that finds the row skips the period.
CREATE TABLE IF NOT EXISTS outbox_job_runs (
    job          VARBINARY(764) NOT NULL,
    period_start DATETIME(6)  NOT NULL,
    instance     VARCHAR(191) NOT NULL DEFAULT x'',
    started_at   DATETIME(6)  NOT NULL,
    finished_at  DATETIME(6)  NOT NULL,
    PRIMARY KEY (job, period_start)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COMMENT = 'outboxgen schema 4';

-- Per-key ordering, the counter: the enqueue of an ordered message takes the next seq of its key
-- here (an upsert that keeps the key's row locked until the enqueuing transaction ends), so two
-- transactions enqueueing for one key take their seqs in the order they commit, and a rolled
-- back one gives its seq back. Since schema version 4.
CREATE TABLE IF NOT EXISTS outbox_ordering (
    ordering_key VARBINARY(191) NOT NULL,
    last_seq     BIGINT       NOT NULL,
    PRIMARY KEY (ordering_key)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COMMENT = 'outboxgen schema 4';

-- Per-key ordering, the queue: one entry per ordered message not yet SENT (deleted in the
-- transaction that marks it SENT, or when it is purged). A message may be claimed only when its
-- seq is the smallest of its key here: it is the key's head, and everything before it was sent.
-- Since schema version 4.
CREATE TABLE IF NOT EXISTS outbox_ordering_queue (
    ordering_key VARBINARY(191) NOT NULL,
    seq          BIGINT       NOT NULL,
    message_id   BIGINT       NOT NULL,
    PRIMARY KEY (ordering_key, seq),
    KEY outbox_ordering_queue_message (message_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COMMENT = 'outboxgen schema 4';
