-- EnqueueMany's statements. sqlc cannot generate a multi-row VALUES list, so each INSERT here is
-- one row's tuple: runtime/outbox/enqueue_many.go repeats it, as the chunk needs, after the
-- column list. Its text therefore comes from here and its arguments from sqlc's parameters, in
-- sqlc's order.

-- name: ManySettings :one
-- Read once per call, before the first INSERT. The packet limit bounds a statement's size. The
-- increment and the lock mode say whether a multi-row INSERT's ids are consecutive: with lock
-- mode 0 or 1 a "simple insert" (its row count known in advance) takes consecutive values,
-- increment apart; with 2 (MySQL's default) the manual does not promise it, so ids are read back.
-- now is the database clock (messages.sql spells it), as text so that the read needs no
-- parseTime: the inline INSERTs write it into every row as a literal, which the server reads
-- more cheaply than it evaluates the clock's expression once per row.
SELECT CAST(@@max_allowed_packet AS SIGNED) AS max_packet,
       CAST(@@auto_increment_increment AS SIGNED) AS increment,
       CAST(@@innodb_autoinc_lock_mode AS SIGNED) AS lock_mode,
       CAST(TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()) AS CHAR) AS now;

-- name: MessageInsertManyRow :exec
-- One row of a multi-row MessageInsert (messages.sql says why each expression is as it is).
-- claim_token is NULL, or a marker of the call when its ids are read back: the claim writes a
-- fresh token over it, and every write fenced on a token also requires PROCESSING.
INSERT INTO outbox_messages (
    event_type, payload, idempotency_key, headers, ordering_key, ordering_seq, status, attempts, max_attempts, next_attempt_at, created_at, claim_token
) VALUES (
    sqlc.arg(event_type), CAST(sqlc.arg(payload) AS BINARY), IFNULL(sqlc.arg(idempotency_key), x''), CAST(sqlc.narg(headers) AS BINARY),
    sqlc.narg(ordering_key), sqlc.narg(ordering_seq), 'PENDING', 0, sqlc.arg(max_attempts),
    TIMESTAMPADD(MICROSECOND, CAST(sqlc.arg(delay_us) AS SIGNED), TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP())), TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()),
    sqlc.narg(claim_token)
);

-- name: MessageInsertManyRowNow :exec
-- MessageInsertManyRow for a call with no ordering key and no delay, with the fewer expressions
-- of MessageInsertNow.
INSERT INTO outbox_messages (
    event_type, payload, idempotency_key, headers, max_attempts, next_attempt_at, created_at, claim_token
) VALUES (
    sqlc.arg(event_type), CAST(sqlc.arg(payload) AS BINARY), IFNULL(sqlc.arg(idempotency_key), x''), CAST(sqlc.narg(headers) AS BINARY), sqlc.arg(max_attempts),
    TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()), TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()),
    sqlc.narg(claim_token)
);

-- name: MessageInsertManyRowInline :exec
-- One row of a multi-row INSERT sent with inline literals (sendDB): every string a hex literal,
-- every absent value NULL, the clock ManySettings' now (plus the call's delay). A hex literal is
-- a binary string whatever the connection's charset, and an empty one is not NULL under
-- EMPTY_STRING_IS_NULL, so the CAST and IFNULL of MessageInsertManyRow are not needed. Each
-- expression is evaluated once per row, which a backfill of many rows pays for.
INSERT INTO outbox_messages (
    event_type, payload, idempotency_key, headers, ordering_key, ordering_seq, max_attempts, next_attempt_at, created_at, claim_token
) VALUES (
    sqlc.arg(event_type), sqlc.arg(payload), sqlc.arg(idempotency_key), sqlc.narg(headers),
    sqlc.narg(ordering_key), sqlc.narg(ordering_seq), sqlc.arg(max_attempts), sqlc.arg(next_attempt_at), sqlc.arg(created_at),
    sqlc.narg(claim_token)
);

-- name: MessageIDsByMarker :many
-- The ids of one multi-row INSERT, when they may not be consecutive. The statement's first id is
-- its LAST_INSERT_ID, and every row it wrote has a larger id, in the order of its VALUES. Rows of
-- other transactions in that range have another claim_token (or none). The range scan is on the
-- primary key, from the first id on.
SELECT id FROM outbox_messages
WHERE id >= sqlc.arg(first_id) AND claim_token = sqlc.arg(claim_token)
ORDER BY id
LIMIT ?;

-- name: OrderingNextMany :execlastid
-- OrderingNext for n messages of one key at once: the statement's insert id is the last of the
-- key's n new seqs. The key's row stays locked until the enqueuing transaction ends.
INSERT INTO outbox_ordering (ordering_key, last_seq)
VALUES (sqlc.arg(ordering_key), LAST_INSERT_ID(CAST(sqlc.arg(n) AS SIGNED)))
ON DUPLICATE KEY UPDATE last_seq = LAST_INSERT_ID(last_seq + CAST(sqlc.arg(n) AS SIGNED));

-- name: OrderingQueueInsertManyRow :exec
-- One row of a multi-row OrderingQueueInsert.
INSERT INTO outbox_ordering_queue (ordering_key, seq, message_id)
VALUES (sqlc.arg(ordering_key), sqlc.arg(seq), sqlc.arg(message_id));
