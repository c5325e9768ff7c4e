-- name: OrderingBrokenHeads :many
-- Broken ordering keys are rows that stall a key for good and that nothing in the runtime would
-- ever move. The runtime never leaves them, since it writes and removes a message and its queue
-- entry in one transaction. A hand-run DELETE or UPDATE can. Stats reports them and the
-- workers' maintenance repairs them.
-- These are the keys whose head entry, with the smallest seq, can never be claimed. Its message
-- is gone, done, or not the entry's. Done means SENT, or any status that never runs again. Not
-- the entry's means the message's own key or seq differ. The claim takes an ordered message
-- only when its own key and seq are the head. Each of these thus stalls every message behind
-- it. found is 0 when the message is gone, and its status and event type are then NULL. A
-- FAILED head is not here, since it holds its key by design, as OrderingHeldKeys reports.
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
-- Ordered PENDING messages without a queue entry at their own key and seq. They are never
-- claimed, since the claim takes an ordered message only as its key's head. It lists only those
-- enqueued at least min_age_us ago, and 0 lists all. It walks the PENDING rows, as Stats's count
-- does, with a primary-key lookup in the queue for each ordered one. The index is forced: for
-- ORDER BY id with a LIMIT every server here prefers the primary key, read in id order until
-- the LIMIT is met. With no unqueued row that reads the whole table, SENT history included,
-- at every maintenance pass (BENCHMARKS.md, history).
SELECT m.id, m.ordering_key, m.ordering_seq, m.event_type
FROM outbox_messages m FORCE INDEX (outbox_messages_claim)
WHERE m.status = 'PENDING'
  AND m.ordering_key IS NOT NULL
  AND TIMESTAMPDIFF(MICROSECOND, m.created_at, TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP())) >= CAST(sqlc.arg(min_age_us) AS SIGNED)
  AND NOT EXISTS (SELECT 1 FROM outbox_ordering_queue q
                  WHERE q.ordering_key = m.ordering_key AND q.seq = m.ordering_seq AND q.message_id = m.id)
ORDER BY m.id
LIMIT ?;

-- name: BrokenMessageLock :many
-- The repair's first step, in its READ COMMITTED transaction. It locks the message, so that the
-- repair's checks cannot go stale before the write. A locking read sees the latest committed
-- row. It returns no row when the message is gone. old is 1 when the message is at least
-- min_age_us old.
SELECT id, status, ordering_key, ordering_seq,
       CAST(TIMESTAMPDIFF(MICROSECOND, created_at, TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP())) >= CAST(sqlc.arg(min_age_us) AS SIGNED) AS SIGNED) AS old
FROM outbox_messages
WHERE id = sqlc.arg(id)
FOR UPDATE;

-- name: BrokenEntryLock :many
-- The entry the repair acts on, locked. It returns no row when the entry is gone or names
-- another message.
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
