-- name: MessageListFailedPage :many
-- The list of the on-call console in runtime/outboxconsole. It shows FAILED messages newest
-- first, one page at a time, without their payloads. The message page shows one whole. OFFSET
-- paging suffices, since a person reads a few pages. As for ListFailed, the server reads the
-- FAILED rows through the claim index's status prefix. The operator calls of runtime/outbox do
-- the rest.
SELECT id, event_type, attempts, max_attempts, CAST(last_error AS BINARY) AS last_error, created_at, failed_at
FROM outbox_messages
WHERE status = 'FAILED'
  AND (CAST(sqlc.arg(any_type) AS SIGNED) = 1 OR event_type = sqlc.arg(event_type))
ORDER BY failed_at DESC, id DESC
LIMIT ? OFFSET ?;

-- name: MessageMaxID :one
-- The newest row's id, from the end of the PRIMARY KEY. The console charts arrivals from its
-- growth between two samples. Stats never counts SENT rows, so this is how it sees traffic.
SELECT CAST(COALESCE(MAX(id), 0) AS SIGNED) AS max_id
FROM outbox_messages;
