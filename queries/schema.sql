-- The tables of outboxgen, github.com/outboxgen/outboxgen, as `outboxgen schema` prints them.
-- Save this as a migration for goose, atlas or golang-migrate, or let outbox.Migrate create the
-- tables that are missing. Every time column is written from the database clock with
-- UTC_TIMESTAMP(6), never from the application's.
--
-- This is schema version 6, which each table's COMMENT records. outbox.Migrate and `outboxgen
-- schema --upgrade` bring tables of earlier versions up to it with queries/upgrades. A COMMENT
-- of 'outboxgen schema N min M' lets workers of version M and later run on the table. Without
-- min, only version N and later may. What is compared as an identifier is VARBINARY, for byte
-- comparison on every server. Identifiers are event types, keys, consumers, job names and
-- tokens. The default collations are case- and accent-blind, and MariaDB's _bin ones ignore
-- trailing spaces. The payload is text with a binary collation, so it comes back byte for byte.
-- MySQL's JSON type would reorder keys and rewrite numbers. JSON_VALUE on the payload still
-- works on every server. The runtime checks that it is valid JSON and UTF-8 before the INSERT.
-- Empty defaults are written x'' because MariaDB's sql_mode EMPTY_STRING_IS_NULL turns '' into
-- NULL.

CREATE TABLE IF NOT EXISTS outbox_messages (
    id              BIGINT       NOT NULL AUTO_INCREMENT,
    -- The wire name from events.yaml, never derived from Go names.
    event_type      VARBINARY(191) NOT NULL,
    -- JSON, validated before the INSERT, of at most outbox.MaxPayloadBytes.
    payload         LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    -- Indexed, not unique. Enqueueing the same logical event twice is legal, and handlers deduplicate.
    idempotency_key VARBINARY(191) NOT NULL DEFAULT x'',
    -- CANCELLED is last, since appending a value changes only metadata. Since schema version 5.
    status          ENUM('PENDING', 'PROCESSING', 'SENT', 'FAILED', 'CANCELLED') NOT NULL DEFAULT 'PENDING',
    -- Claims so far. A reclaim does not add one, since the claim already counted.
    attempts        INT          NOT NULL DEFAULT 0,
    -- Resolved at enqueue from the event's policy.
    max_attempts    INT          NOT NULL,
    next_attempt_at DATETIME(6)  NOT NULL,
    claimed_at      DATETIME(6)  NULL,
    -- claimed_at plus the claiming worker's StaleAfter. The lease lives on the row, so workers
    -- with different StaleAfter share the table and Stats needs no worker config.
    reclaim_after   DATETIME(6)  NULL,
    -- Fresh per claim. Every write after the claim is fenced on the id, PROCESSING and this token.
    claim_token     VARBINARY(32) NULL,
    last_error      TEXT         NULL,
    created_at      DATETIME(6)  NOT NULL,
    sent_at         DATETIME(6)  NULL,
    failed_at       DATETIME(6)  NULL,
    -- Message headers as a JSON object of strings, such as outbox.Header's and the trace
    -- context. Written once at enqueue, and NULL when there are none. Since schema version 3.
    headers         TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    -- For ordered events only, with events.yaml's ordering_key. The key is group-prefixed and
    -- opaque. The seq is the message's place in its key's commit order. Both are NULL for
    -- unordered events, which therefore pay no index entry for them. Since schema version 4.
    ordering_key    VARBINARY(191) NULL,
    ordering_seq    BIGINT       NULL,
    -- When an operator cancelled the message. A PENDING row becomes CANCELLED at once. A
    -- PROCESSING row keeps running, and its result write makes it CANCELLED instead of retrying
    -- it. Since schema version 5.
    cancelled_at    DATETIME(6)  NULL,
    PRIMARY KEY (id),
    -- Serves the claim, which reads PENDING rows due now in next_attempt_at and id order.
    -- Its status prefix also serves everything else that selects by status. That is the reclaim,
    -- the stale and stuck counts over the few PROCESSING rows, Purge and the FAILED listings. It
    -- is deliberately the only index with status in it. An index entry changes whenever its
    -- columns do. Every status-prefixed index thus costs a delete-mark and an insert on every
    -- claim and every result. BENCHMARKS.md measures the gain of one such index instead of four.
    KEY outbox_messages_claim (status, next_attempt_at, id),
    -- For people asking whether the message for this key is sent. Written once at enqueue, never changed.
    KEY outbox_messages_idempotency_key (idempotency_key)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COMMENT = 'outboxgen schema 6 min 4';

-- outbox.Once. A handler records its consumer and key in its own transaction. The PRIMARY KEY
-- makes the second insert fail, so the handler's DB effects happen at most once.
CREATE TABLE IF NOT EXISTS outbox_inbox (
    -- 764 bytes hold 191 utf8mb4 characters, the width of version 1's column, so no key shrinks.
    consumer     VARBINARY(764) NOT NULL,
    idem_key     VARBINARY(764) NOT NULL,
    processed_at DATETIME(6)  NOT NULL,
    -- When retention may delete the key: processed_at plus the longer of Retention.Inbox and the
    -- handler's redelivery window. NULL on rows of workers older than schema version 6, which
    -- retention ages from processed_at instead. Since schema version 6.
    expires_at   DATETIME(6)  NULL,
    PRIMARY KEY (consumer, idem_key),
    -- Serves retention, which deletes the expired keys oldest first. Since schema version 6.
    KEY outbox_inbox_expires (expires_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COMMENT = 'outboxgen schema 6 min 4';

-- The mysqllock run ledger. A job that must run once per period writes its name and period
-- after it succeeds. An instance that finds the row skips the period.
CREATE TABLE IF NOT EXISTS outbox_job_runs (
    job          VARBINARY(764) NOT NULL,
    period_start DATETIME(6)  NOT NULL,
    instance     VARCHAR(191) NOT NULL DEFAULT x'',
    started_at   DATETIME(6)  NOT NULL,
    finished_at  DATETIME(6)  NOT NULL,
    PRIMARY KEY (job, period_start)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COMMENT = 'outboxgen schema 6 min 4';

-- Per-key ordering, the counter. The enqueue of an ordered message takes the next seq of its key
-- here, with an upsert that keeps the key's row locked until the enqueuing transaction ends.
-- Two transactions enqueueing for one key thus take their seqs in the order they commit. A
-- rolled back one gives its seq back. Since schema version 4.
CREATE TABLE IF NOT EXISTS outbox_ordering (
    ordering_key VARBINARY(191) NOT NULL,
    last_seq     BIGINT       NOT NULL,
    PRIMARY KEY (ordering_key)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COMMENT = 'outboxgen schema 6 min 4';

-- Per-key ordering, the queue. It holds one entry per ordered message not yet SENT. The entry is
-- deleted in the transaction that marks it SENT, or when it is purged. A message may be claimed
-- only when its seq is the smallest of its key here. It is then the key's head, and everything
-- before it is sent. Since schema version 4.
CREATE TABLE IF NOT EXISTS outbox_ordering_queue (
    ordering_key VARBINARY(191) NOT NULL,
    seq          BIGINT       NOT NULL,
    message_id   BIGINT       NOT NULL,
    PRIMARY KEY (ordering_key, seq),
    KEY outbox_ordering_queue_message (message_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COMMENT = 'outboxgen schema 6 min 4';

-- Event types that workers do not claim, fleet-wide, set by outbox.Pause and `outboxgen pause`.
-- A pause with paused_until ends by itself at that time on the database clock. Workers read the
-- active pauses at most twice a second. Since schema version 5.
CREATE TABLE IF NOT EXISTS outbox_pauses (
    event_type   VARBINARY(191) NOT NULL,
    reason       TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    paused_at    DATETIME(6)  NOT NULL,
    paused_until DATETIME(6)  NULL,
    PRIMARY KEY (event_type)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COMMENT = 'outboxgen schema 6 min 4';

-- Token buckets of events.yaml's rate_limit, one row per limited event type, shared by every
-- worker on the table. A claim takes tokens in one short statement on the database clock: it
-- first refills the bucket by the time since refilled_at, up to the limit's N, then takes what
-- it claims. Since schema version 6.
CREATE TABLE IF NOT EXISTS outbox_rate_limits (
    event_type  VARBINARY(191) NOT NULL,
    tokens      DOUBLE       NOT NULL,
    refilled_at DATETIME(6)  NOT NULL,
    PRIMARY KEY (event_type)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COMMENT = 'outboxgen schema 6 min 4';
