-- The reclaim's release of ordering keys (runtime/outbox/reclaim_release.go).

-- name: ReclaimCancelledOrderedIDs :many
-- In the reclaim's READ COMMITTED transaction, right after MessageReclaimStale: the ordered
-- messages that are CANCELLED with a next_attempt_at within the last minute, which holds those
-- the reclaim just made CANCELLED (it sets next_attempt_at to now), read in the transaction's
-- own view, latest first, so that those come before any others. OrderingQueueDeleteCancelled
-- then releases their keys before the commit. Others in the range released theirs already, and
-- the delete finds no entry of theirs. A range of the claim index, without locks: a CANCELLED
-- row never changes again.
SELECT id
FROM outbox_messages FORCE INDEX (outbox_messages_claim)
WHERE status = 'CANCELLED'
  AND next_attempt_at >= TIMESTAMPADD(MINUTE, -1, TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()))
  AND next_attempt_at <= TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP())
  AND ordering_key IS NOT NULL
ORDER BY next_attempt_at DESC, id DESC
LIMIT ?;
