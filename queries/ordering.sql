-- Per-key ordering, for events.yaml's ordering_key. These are the seq counter and the queue of
-- unsent ordered messages. schema.sql says why each exists.

-- name: OrderingNext :execlastid
-- The next seq of a key, on the enqueuing transaction. LAST_INSERT_ID(expr) makes the seq the
-- statement's insert id, read back from the OK packet. The seq is 1 for a new key, and last_seq
-- + 1 otherwise. The key's row stays locked until the enqueuing transaction ends, which orders
-- the seqs of one key by commit. It runs under OrderingKeyLock, as docs/design.md explains.
INSERT INTO outbox_ordering (ordering_key, last_seq)
VALUES (sqlc.arg(ordering_key), LAST_INSERT_ID(1))
ON DUPLICATE KEY UPDATE last_seq = LAST_INSERT_ID(last_seq + 1);

-- name: OrderingKeyLock :many
-- The key's named lock, held by the session only while OrderingNext runs. Its name is a hash of
-- the database and the key, so that keys and databases do not share one. The name has 60
-- lowercase ASCII characters, under MySQL's limit of 64. The hash is of bytes, since DATABASE()
-- is utf8mb3 text. A key beyond the BMP, such as an emoji, cannot join it as text. It waits at
-- most 1 second, a whole number as locks.sql explains. 1 means acquired. 0 means another session
-- held it throughout. -1 means NULL, a call the server failed. It is typed as in locks.sql.
SELECT CAST(COALESCE(GET_LOCK(CONCAT('outboxgen.key.', LEFT(SHA2(CONCAT(CAST(DATABASE() AS BINARY), x'2f', sqlc.arg(ordering_key)), 256), 46)), 1), -1) AS SIGNED) AS acquired;

-- name: OrderingKeyUnlock :exec
SELECT RELEASE_LOCK(CONCAT('outboxgen.key.', LEFT(SHA2(CONCAT(CAST(DATABASE() AS BINARY), x'2f', sqlc.arg(ordering_key)), 256), 46)));

-- name: OrderingQueueInsert :exec
INSERT INTO outbox_ordering_queue (ordering_key, seq, message_id)
VALUES (sqlc.arg(ordering_key), sqlc.arg(seq), sqlc.arg(message_id));

-- name: OrderingQueueCleanup :execrows
-- After a purge deleted messages, their queue entries go too. A purged FAILED head thus
-- releases its key. The queue holds only unsent ordered messages, so the scan is small.
DELETE FROM outbox_ordering_queue
WHERE NOT EXISTS (SELECT 1 FROM outbox_messages m WHERE m.id = outbox_ordering_queue.message_id);

-- name: OrderingHeldKeys :many
-- Keys whose head cannot be claimed now while other messages of the key wait behind it, oldest
-- wait first. Such a head is FAILED, or PENDING until a later time set by a retry's backoff or
-- a Delay. held_us is how long the first message behind the head has waited since its enqueue.
SELECT q.ordering_key, q.message_id AS head_id, m.status AS head_status, m.event_type AS head_event_type,
       CAST(h.n - 1 AS SIGNED) AS waiting,
       CAST(COALESCE(TIMESTAMPDIFF(MICROSECOND, w.created_at, TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP())), 0) AS SIGNED) AS held_us
FROM (SELECT ordering_key, MIN(seq) AS head_seq, COUNT(*) AS n
      FROM outbox_ordering_queue GROUP BY ordering_key HAVING COUNT(*) > 1) h
JOIN outbox_ordering_queue q ON q.ordering_key = h.ordering_key AND q.seq = h.head_seq
JOIN outbox_messages m ON m.id = q.message_id
JOIN outbox_ordering_queue q2 ON q2.ordering_key = h.ordering_key AND q2.seq = h.head_seq + 1
JOIN outbox_messages w ON w.id = q2.message_id
WHERE m.status = 'FAILED'
   OR (m.status = 'PENDING' AND m.next_attempt_at > TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()))
ORDER BY held_us DESC
LIMIT ?;

-- name: OrderingQueueDeleteMessages :exec
-- In a purge by id, in the transaction that deletes these messages.
DELETE FROM outbox_ordering_queue
WHERE message_id IN (sqlc.slice('ids'));

-- name: OrderingQueueDeleteSent :execrows
-- In the transaction that marks these messages SENT. Their keys' next messages become heads
-- exactly then. Each entry is found by its whole primary key, read from its message row, so the
-- statement locks those entries alone. A DELETE by message_id would scan the whole queue while
-- it is small, which is the optimizer's choice on every server. It would wait there for every
-- entry an open business transaction has just enqueued. Meanwhile it would hold locks that
-- block other enqueues. The hints keep the plan whatever the table sizes. Messages come first
-- by primary key, then the queue by its primary key.
DELETE q
FROM outbox_messages m FORCE INDEX (PRIMARY)
STRAIGHT_JOIN outbox_ordering_queue q FORCE INDEX (PRIMARY)
  ON q.ordering_key = m.ordering_key AND q.seq = m.ordering_seq AND q.message_id = m.id
WHERE m.id IN (sqlc.slice('ids'));
