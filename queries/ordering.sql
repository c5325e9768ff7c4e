-- Per-key ordering (events.yaml ordering_key): the seq counter and the queue of unsent ordered
-- messages. See schema.sql for why each exists.

-- name: OrderingNext :execlastid
-- The next seq of a key, on the enqueuing transaction. LAST_INSERT_ID(expr) makes the statement's
-- insert id the seq (1 for a new key, last_seq + 1 otherwise), read back from the OK packet. The
-- key's row stays locked until the enqueuing transaction ends, which orders the seqs of one key
-- by commit. Run under OrderingKeyLock (runtime/outbox/ordering_seq.go says why).
INSERT INTO outbox_ordering (ordering_key, last_seq)
VALUES (sqlc.arg(ordering_key), LAST_INSERT_ID(1))
ON DUPLICATE KEY UPDATE last_seq = LAST_INSERT_ID(last_seq + 1);

-- name: OrderingKeyLock :many
-- The key's named lock, held by the session only while OrderingNext runs. Its name is a hash of
-- the database and the key (60 lowercase ASCII characters, under MySQL's limit of 64), so that
-- keys and databases do not share one. The hash is of bytes: DATABASE() is utf8mb3 text, which a
-- key beyond the BMP (an emoji) cannot join as text. It waits at most 1 second (a whole number: see
-- locks.sql). 1 = acquired, 0 = another session held it throughout, -1 = NULL: the server
-- failed the call. (Typed as in locks.sql.)
SELECT CAST(COALESCE(GET_LOCK(CONCAT('outboxgen.key.', LEFT(SHA2(CONCAT(CAST(DATABASE() AS BINARY), x'2f', sqlc.arg(ordering_key)), 256), 46)), 1), -1) AS SIGNED) AS acquired;

-- name: OrderingKeyUnlock :exec
SELECT RELEASE_LOCK(CONCAT('outboxgen.key.', LEFT(SHA2(CONCAT(CAST(DATABASE() AS BINARY), x'2f', sqlc.arg(ordering_key)), 256), 46)));

-- name: OrderingQueueInsert :exec
INSERT INTO outbox_ordering_queue (ordering_key, seq, message_id)
VALUES (sqlc.arg(ordering_key), sqlc.arg(seq), sqlc.arg(message_id));

-- name: OrderingQueueCleanup :execrows
-- After a purge deleted messages: their queue entries go too (a purged FAILED head releases its
-- key). The queue holds only unsent ordered messages, so the scan is small.
DELETE FROM outbox_ordering_queue
WHERE NOT EXISTS (SELECT 1 FROM outbox_messages m WHERE m.id = outbox_ordering_queue.message_id);

-- name: OrderingHeldKeys :many
-- Keys whose head cannot be claimed now (FAILED, or PENDING until a later time: a retry's
-- backoff, a Delay) while other messages of the key wait behind it, oldest wait first.
-- held_us is how long the first message behind the head has waited since it was enqueued.
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
-- In the transaction that marks these messages SENT: their keys' next messages become heads
-- exactly then. Each entry is found by its whole primary key, read from its message row, so the
-- statement locks those entries alone. A DELETE by message_id scans the whole queue while it is
-- small (the optimizer's choice on every server) and waits there for every entry an open
-- business transaction has just enqueued, holding locks that block other enqueues meanwhile.
-- The hints keep that plan whatever the table sizes: messages by primary key first, then the
-- queue by its primary key.
DELETE q
FROM outbox_messages m FORCE INDEX (PRIMARY)
STRAIGHT_JOIN outbox_ordering_queue q FORCE INDEX (PRIMARY)
  ON q.ordering_key = m.ordering_key AND q.seq = m.ordering_seq AND q.message_id = m.id
WHERE m.id IN (sqlc.slice('ids'));
