-- name: TestkitMessagesByType :many
-- For the test kit (runtime/outboxtest): a type's messages in enqueue order, through the caller's handle, so a test sees its own
-- uncommitted transaction.
SELECT id, payload
FROM outbox_messages
WHERE event_type = sqlc.arg(event_type)
ORDER BY id;

-- name: TestkitResetMessages :exec
-- The test kit's Reset empties every outboxgen table with these, one statement per table.
DELETE FROM outbox_messages;

-- name: TestkitResetInbox :exec
DELETE FROM outbox_inbox;

-- name: TestkitResetJobRuns :exec
DELETE FROM outbox_job_runs;

-- name: TestkitResetOrdering :exec
DELETE FROM outbox_ordering;

-- name: TestkitResetOrderingQueue :exec
DELETE FROM outbox_ordering_queue;

-- name: TestkitResetRateLimits :exec
DELETE FROM outbox_rate_limits;
