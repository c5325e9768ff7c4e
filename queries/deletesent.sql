-- Results of event types whose SENT rows are deleted at once (Policy.DeleteWhenSent,
-- events.yaml delete_when_sent): the fenced result write deletes the row instead of marking it
-- SENT (runtime/outbox/deletesent.go). The fence is MessageMarkSent's: the row, still
-- PROCESSING under the claim's token.

-- name: MessageDeleteSentLock :many
-- For a claim's ordered successes, before their queue entries go: the rows the fence lets
-- this claim delete, locked by primary key, so that the entries removed are exactly those of
-- the rows then deleted.
SELECT id
FROM outbox_messages FORCE INDEX (PRIMARY)
WHERE id IN (sqlc.slice('ids'))
  AND status = 'PROCESSING'
  AND claim_token = sqlc.arg(claim_token)
ORDER BY id
FOR UPDATE;

-- name: MessageDeleteSent :execrows
-- The fenced delete of a claim's successes, by primary key. A row reclaimed since belongs to a
-- newer claim and stays.
DELETE FROM outbox_messages
WHERE id IN (sqlc.slice('ids'))
  AND status = 'PROCESSING'
  AND claim_token = sqlc.arg(claim_token);
