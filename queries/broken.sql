-- name: OrderingBrokenHeads :many
-- Broken ordering keys are rows that stall a key for good and that nothing in the runtime would
-- ever move. The runtime never leaves them (an enqueue writes a message and its queue entry in
-- one transaction; a SENT mark or a purge removes the entries with the message), but a hand-run
-- DELETE or UPDATE can. Stats reports them and the workers' maintenance repairs them.
-- Keys whose head entry (smallest seq) can never be claimed: its message is gone, done (SENT,
-- or any status that never runs again), or not the entry's (its own key or seq differ). The
-- claim takes an ordered message only when its own key and seq are the head, so each of these
-- stalls every message behind it. found is 0 when the message is gone (its status
-- and event type are then NULL). A FAILED head is not
-- here: it holds its key by design (OrderingHeldKeys).
SELECT q.ordering_key, q.seq, q.message_id,
       CAST(m.id IS NOT NULL AS SIGNED) AS found,
       m.status, COALESCE(m.event_type, x'') AS event_type
FROM (SELECT ordering_key, MIN(seq) AS head_seq FROM outbox_ordering_queue GROUP BY ordering_key) h
JOIN outbox_ordering_queue q ON q.ordering_key = h.ordering_key AND q.seq = h.head_seq
LEFT JOIN outbox_messages m ON m.id = q.message_id
WHERE m.id IS NULL
   OR m.status NOT IN ('PENDING', 'PROCESSING', 'FAILED')
   OR NOT (m.ordering_key <=> q.ordering_key AND m.ordering_seq <=> q.seq)
ORDER BY q.ordering_key
LIMIT ?;

-- name: OrderingUnqueued :many
-- Ordered PENDING messages without their queue entry (none at their own key and seq): never
-- claimed, since the claim takes an ordered message only as its key's head. Only those enqueued
-- at least min_age_us ago (0: all). It walks the PENDING rows, as Stats's count does, with a
-- primary-key lookup in the queue for each ordered one.
SELECT m.id, m.ordering_key, m.ordering_seq, m.event_type
FROM outbox_messages m
WHERE m.status = 'PENDING'
  AND m.ordering_key IS NOT NULL
  AND TIMESTAMPDIFF(MICROSECOND, m.created_at, TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP())) >= CAST(sqlc.arg(min_age_us) AS SIGNED)
  AND NOT EXISTS (SELECT 1 FROM outbox_ordering_queue q
                  WHERE q.ordering_key = m.ordering_key AND q.seq = m.ordering_seq AND q.message_id = m.id)
ORDER BY m.id
LIMIT ?;

-- name: BrokenMessageLock :many
-- The repair's first step, in its READ COMMITTED transaction: lock the message (a locking read
-- sees the latest committed row) so that the checks below cannot go stale before the write. No
-- row when the message is gone. old is 1 when it was enqueued at least min_age_us ago.
SELECT id, status, ordering_key, ordering_seq,
       CAST(TIMESTAMPDIFF(MICROSECOND, created_at, TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP())) >= CAST(sqlc.arg(min_age_us) AS SIGNED) AS SIGNED) AS old
FROM outbox_messages
WHERE id = sqlc.arg(id)
FOR UPDATE;

-- name: BrokenEntryLock :many
-- The entry the repair acts on, locked; no row when it is gone or names another message.
SELECT message_id
FROM outbox_ordering_queue
WHERE ordering_key = sqlc.arg(ordering_key) AND seq = sqlc.arg(seq) AND message_id = sqlc.arg(message_id)
FOR UPDATE;

-- name: BrokenEntryDelete :execrows
DELETE FROM outbox_ordering_queue
WHERE ordering_key = sqlc.arg(ordering_key) AND seq = sqlc.arg(seq) AND message_id = sqlc.arg(message_id);

-- name: BrokenMessageReseq :execrows
-- An unqueued message's new place at the end of its key, in the transaction that queues it.
UPDATE outbox_messages
SET ordering_seq = sqlc.arg(seq)
WHERE id = sqlc.arg(id) AND status = 'PENDING';
