-- name: MessageListFailedPage :many
-- The on-call console's list (runtime/outboxconsole): FAILED messages newest first, one page at
-- a time, without their payloads (the message page shows one whole). OFFSET paging: a person
-- reads a few pages; like ListFailed, the server reads the FAILED rows through the claim index's
-- status prefix. The operator calls of runtime/outbox (Stats, Inspect, Retry, Purge) do the rest.
SELECT id, event_type, attempts, max_attempts, CAST(last_error AS BINARY) AS last_error, created_at, failed_at
FROM outbox_messages
WHERE status = 'FAILED'
  AND (CAST(sqlc.arg(any_type) AS SIGNED) = 1 OR event_type = sqlc.arg(event_type))
ORDER BY failed_at DESC, id DESC
LIMIT ? OFFSET ?;

-- name: MessageMaxID :one
-- The newest row's id, from the end of the PRIMARY KEY: the console charts arrivals from its
-- growth between two samples (Stats never counts SENT rows, so this is how it sees traffic).
SELECT CAST(COALESCE(MAX(id), 0) AS SIGNED) AS max_id
FROM outbox_messages;
