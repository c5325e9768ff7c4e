-- Named locks for runtime/mysqllock. Every statement runs on the lock's own pinned *sql.Conn.
-- A named lock belongs to the session, so GET_LOCK, the watchdog check and RELEASE_LOCK must
-- all reach the same one.
--
-- sqlc's MySQL catalog types GET_LOCK, RELEASE_LOCK and IS_USED_LOCK as non-null bool. That
-- breaks on NULL and hides the difference between 0 and NULL. Each call is therefore wrapped
-- in COALESCE with -1 and cast to SIGNED. sqlc then generates an int64, and NULL arrives as -1.
-- A driver that sends the text "0" is converted by database/sql to the integer 0, never read
-- as "truthy". Callers treat anything but exactly 1 as not acquired or not released.

-- name: LockAcquire :one
-- GET_LOCK waits up to wait_seconds, a whole number. MySQL rounds a fractional timeout, so 0.4
-- is no wait at all and 1.6 waits 2 s. The Go side therefore waits whole seconds here and
-- polls the rest with wait_seconds = 0. 1 means acquired. 0 means held by another session, or
-- the wait timed out. -1 means NULL, a call the server failed, say after KILL QUERY. It is never
-- a silent skip. conn_id is the session, read in the same round trip, for incidents and the
-- watchdog.
SELECT CAST(COALESCE(GET_LOCK(sqlc.arg(name), CAST(sqlc.arg(wait_seconds) AS SIGNED)), -1) AS SIGNED) AS acquired,
       CAST(CONNECTION_ID() AS SIGNED) AS conn_id;

-- name: LockHolder :one
-- The watchdog's check. It reads which session holds the lock, 0 for nobody, and which
-- session is asking. The lock is still the asker's only when holder = conn_id.
SELECT CAST(COALESCE(IS_USED_LOCK(sqlc.arg(name)), 0) AS SIGNED) AS holder,
       CAST(CONNECTION_ID() AS SIGNED) AS conn_id;

-- name: LockRelease :one
-- 1 means released. 0 means held by another session. -1 means NULL, so nobody holds it.
-- Anything but 1 means the lock was lost while the critical section ran.
SELECT CAST(COALESCE(RELEASE_LOCK(sqlc.arg(name)), -1) AS SIGNED) AS released;
