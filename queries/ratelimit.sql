-- Token buckets of rate-limited event types, in outbox_rate_limits (events.yaml rate_limit).
-- A bucket holds up to its capacity of tokens and gains capacity tokens per period, on the
-- database clock. A claim of a limited type takes its tokens inside its own transaction: it
-- locks the bucket, claims at most the whole tokens there are, and writes back what is left.

-- name: RateLimitLock :one
-- elapsed_us is the time since the bucket's last refill on the database clock. The claim
-- computes the refill from it and moves refilled_at by exactly as much, so no time is lost or
-- counted twice between the read and the write.
SELECT tokens,
       CAST(TIMESTAMPDIFF(MICROSECOND, refilled_at, TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP())) AS SIGNED) AS elapsed_us
FROM outbox_rate_limits
WHERE event_type = sqlc.arg(event_type)
FOR UPDATE;

-- name: RateLimitCreate :exec
-- A new bucket starts empty, so a backlog waiting when a limit first applies starts at the
-- limit's rate rather than with a burst of a whole bucket. The duplicate case is a bucket
-- another worker created meanwhile, which stays as it is.
INSERT INTO outbox_rate_limits (event_type, tokens, refilled_at)
VALUES (sqlc.arg(event_type), 0, TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()))
ON DUPLICATE KEY UPDATE event_type = event_type;

-- name: RateLimitTake :execrows
-- The refill up to the capacity, less the tokens the claim used. The arithmetic is in DOUBLE
-- (1e0 first), so a bucket left alone for years cannot overflow BIGINT.
UPDATE outbox_rate_limits
SET tokens      = GREATEST(0, LEAST(CAST(sqlc.arg(capacity) AS SIGNED),
                                    tokens + 1e0 * CAST(sqlc.arg(elapsed_us) AS SIGNED) * CAST(sqlc.arg(capacity) AS SIGNED) / CAST(sqlc.arg(per_us) AS SIGNED))
                              - CAST(sqlc.arg(used) AS SIGNED)),
    refilled_at = TIMESTAMPADD(MICROSECOND, CAST(sqlc.arg(elapsed_us) AS SIGNED), refilled_at)
WHERE event_type = sqlc.arg(event_type);

-- name: RateLimitProbe :one
-- NewWorker's check that outbox_rate_limits exists, which schema version 6 creates, when its
-- router has a rate-limited type. Error 1146 means Migrate must run.
SELECT CAST(COUNT(*) AS SIGNED) AS n FROM outbox_rate_limits WHERE event_type = x'';
