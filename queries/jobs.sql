-- The run ledger of runtime/mysqllock jobs with OncePerPeriod. The job and period_start make
-- the PRIMARY KEY, so a period can be recorded once. Times come from the database clock. The
-- TIMESTAMPADD expression is UTC_TIMESTAMP(6) spelled so that sqlc parses it, as messages.sql
-- explains. The ledger is read under the job's named lock before the job runs. It is written
-- after the job succeeds, still under the lock.

-- name: JobRunCount :one
-- How many times the job is recorded for the period, 0 or 1, and the database clock. The clock
-- becomes started_at when the job then runs.
SELECT CAST(COUNT(*) AS SIGNED) AS runs, CAST(TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()) AS DATETIME(6)) AS now
FROM outbox_job_runs
WHERE job = sqlc.arg(job) AND period_start = sqlc.arg(period_start);

-- name: JobRunInsert :exec
INSERT INTO outbox_job_runs (job, period_start, instance, started_at, finished_at)
VALUES (sqlc.arg(job), sqlc.arg(period_start), sqlc.arg(instance), sqlc.arg(started_at),
        TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP()));

-- name: JobRunLatest :many
-- Each job's most recent recorded run, for mysqllock.LastRuns and the console's jobs page. The
-- grouped MAX reads the PRIMARY KEY one job at a time.
SELECT r.job, r.period_start, r.instance, r.started_at, r.finished_at
FROM outbox_job_runs AS r
JOIN (SELECT job, MAX(period_start) AS period_start FROM outbox_job_runs GROUP BY job) AS latest
  ON latest.job = r.job AND latest.period_start = r.period_start
ORDER BY r.job
LIMIT ?;

-- name: JobRunListByJob :many
-- One job's recorded runs, newest period first, for mysqllock.Runs.
SELECT job, period_start, instance, started_at, finished_at
FROM outbox_job_runs
WHERE job = sqlc.arg(job)
ORDER BY period_start DESC
LIMIT ?;
