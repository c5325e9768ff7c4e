-- Named locks for runtime/mysqllock. Every statement runs on the lock's own pinned *sql.Conn:
-- a named lock belongs to the session, so GET_LOCK, the watchdog check and RELEASE_LOCK must
-- all reach the same one.
--
-- sqlc v1.31.1 types GET_LOCK, RELEASE_LOCK and IS_USED_LOCK as non-null bool (its MySQL
-- catalog says so), which breaks on NULL and hides the difference between 0 and NULL. Each
-- call is therefore wrapped as CAST(COALESCE(f(...), -1) AS SIGNED): sqlc then generates an
-- int64, NULL arrives as -1, and a driver that sends the text "0" (go-sql-driver v1.7.1 did)
-- is converted by database/sql to the integer 0, never read as "truthy". Callers treat
-- anything but exactly 1 as "not acquired" / "not released".

-- name: LockAcquire :one
-- GET_LOCK waits up to wait_seconds, a whole number: MySQL rounds a fractional timeout (0.4
-- is no wait at all, 1.6 waits 2 s), so the Go side waits whole seconds here and polls the
-- rest with wait_seconds = 0. 1 = acquired, 0 = held by another session (or the wait timed
-- out), -1 = NULL: the server failed the call (KILL QUERY, an error): never a silent skip.
-- conn_id is the session, read in the same round trip, for incidents and the watchdog.
SELECT CAST(COALESCE(GET_LOCK(sqlc.arg(name), CAST(sqlc.arg(wait_seconds) AS SIGNED)), -1) AS SIGNED) AS acquired,
       CAST(CONNECTION_ID() AS SIGNED) AS conn_id;

-- name: LockHolder :one
-- The watchdog's check: which session holds the lock (0 = nobody) and which session is asking.
-- The lock is still ours only when holder = conn_id.
SELECT CAST(COALESCE(IS_USED_LOCK(sqlc.arg(name)), 0) AS SIGNED) AS holder,
       CAST(CONNECTION_ID() AS SIGNED) AS conn_id;

-- name: LockRelease :one
-- 1 = released; 0 = held by another session; -1 = NULL, nobody holds it. Anything but 1 means
-- the lock was lost while the critical section ran.
SELECT CAST(COALESCE(RELEASE_LOCK(sqlc.arg(name)), -1) AS SIGNED) AS released;
