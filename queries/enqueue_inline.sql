-- Enqueue's statements when they go with inline literals (runtime/outbox/sqlliteral.go): every
-- string a hex literal, every absent value NULL.

-- name: MessageInsertNowInline :execlastid
-- MessageInsertNow as sendDB sends it inline. A hex literal is a binary string whatever the
-- connection's charset, and an empty one is not NULL under EMPTY_STRING_IS_NULL, so the CAST
-- and IFNULL that arguments need are left out: each expression the server evaluates shows in
-- the enqueue's cost. For the same reason the clock is evaluated once: created_at names
-- next_attempt_at, which a VALUES list may do for a column set before it in the list, and gets
-- the value just set, on MySQL and MariaDB alike.
INSERT INTO outbox_messages (
    event_type, payload, idempotency_key, headers, max_attempts, next_attempt_at, created_at
) VALUES (
    sqlc.arg(event_type), sqlc.arg(payload), sqlc.arg(idempotency_key), sqlc.narg(headers), sqlc.arg(max_attempts),
    TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()), next_attempt_at
);
