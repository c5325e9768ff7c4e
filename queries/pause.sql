-- Pauses of event types, in outbox_pauses (outbox.Pause, outbox.Resume, `outboxgen pause`).

-- name: PauseSet :exec
-- A pause of a paused type replaces the first: its reason and end are the newest operator's.
-- paused_at stays, so status says since when the type has been held. A for_us of 0 means no
-- end. Times come from the database clock, as the workers that compare them read it.
INSERT INTO outbox_pauses (event_type, reason, paused_at, paused_until)
VALUES (sqlc.arg(event_type), CAST(sqlc.narg(reason) AS BINARY), TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()),
        IF(CAST(sqlc.arg(for_us) AS SIGNED) > 0,
           TIMESTAMPADD(MICROSECOND, CAST(sqlc.arg(for_us) AS SIGNED), TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP())), NULL))
ON DUPLICATE KEY UPDATE
    reason       = VALUES(reason),
    paused_until = VALUES(paused_until),
    paused_at    = IF(paused_until IS NOT NULL AND paused_until <= TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()),
                      VALUES(paused_at), paused_at);

-- name: PauseDelete :execrows
DELETE FROM outbox_pauses WHERE event_type = sqlc.arg(event_type);

-- name: PauseDeleteEnded :execrows
-- Pauses whose end has passed hold nothing. Pause and Resume drop them, so the table keeps only
-- live pauses without a job of its own.
DELETE FROM outbox_pauses
WHERE paused_until IS NOT NULL
  AND paused_until <= TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP());

-- name: PauseActiveTypes :many
-- The worker's refresh: the types paused now, on the database clock. A pause whose end has
-- passed is over here, whether or not its row has been dropped yet.
SELECT event_type FROM outbox_pauses
WHERE paused_until IS NULL
   OR paused_until > TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP());

-- name: PauseList :many
-- The pauses in force, for status and operators, with the time left.
SELECT event_type, CAST(reason AS BINARY) AS reason, paused_at, paused_until,
       CAST(COALESCE(TIMESTAMPDIFF(MICROSECOND, TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()), paused_until), -1) AS SIGNED) AS left_us
FROM outbox_pauses
WHERE paused_until IS NULL
   OR paused_until > TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP())
ORDER BY event_type;

-- name: PauseProbe :one
-- NewWorker's check that outbox_pauses exists, which schema version 5 creates. Error 1146 means
-- Migrate must run.
SELECT CAST(COUNT(*) AS SIGNED) AS n FROM outbox_pauses WHERE event_type = x'';

-- name: TestkitResetPauses :exec
-- outboxtest.Reset: a pause left by one test must not hold the next test's messages.
DELETE FROM outbox_pauses;
