-- The reclaim's release of ordering keys (runtime/outbox/reclaim_release.go).

-- name: ReclaimCancelledOrderedLock :many
-- In the reclaim's READ COMMITTED transaction, before MessageReclaimStale: the expired ordered
-- leases an operator cancelled while they ran, locked, so that the reclaim that makes them
-- CANCELLED and the release of their keys (OrderingQueueDeleteCancelled) commit together. It
-- reads the PROCESSING range of the claim index, as the reclaim does.
SELECT id
FROM outbox_messages FORCE INDEX (outbox_messages_claim)
WHERE status = 'PROCESSING'
  AND reclaim_after < TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP())
  AND cancelled_at IS NOT NULL
  AND ordering_key IS NOT NULL
ORDER BY id
LIMIT ?
FOR UPDATE;
