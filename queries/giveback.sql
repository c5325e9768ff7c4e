-- Queries of the worker's shutdown, compiled by sqlc into runtime/internal/store.

-- name: MessageGiveBackClaim :execrows
-- Fenced, for one claim's rows at once. At shutdown, the rows of a claim that no handler has
-- started go back to PENDING, due at once, with the claim's attempt given back. MessageGiveBack
-- does the same for one row. A row whose lease expired and was reclaimed no longer
-- carries this claim's token and is left alone. An ordered row keeps its queue entry, so a key's
-- head given back stays its key's head. A row an operator cancelled meanwhile becomes CANCELLED,
-- and the repair of broken keys then removes an ordered one's entry.
UPDATE outbox_messages FORCE INDEX (PRIMARY)
SET status          = IF(cancelled_at IS NULL, 'PENDING', 'CANCELLED'),
    attempts        = GREATEST(attempts, 1) - 1,
    next_attempt_at = TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP())
WHERE status = 'PROCESSING'
  AND claim_token = sqlc.arg(claim_token)
  AND id IN (sqlc.slice('ids'));
