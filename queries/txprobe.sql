-- The probe that tells whether a session has a transaction open (a *sql.Conn handed to
-- Enqueue). Inside one, the savepoint lives until its release; outside, autocommit ends it with
-- the statement, so the release fails with 1305 (ER_SP_DOES_NOT_EXIST). MariaDB and MySQL
-- behave alike. Inside a transaction the pair leaves it as it was: no savepoint of this name
-- lives anywhere but between the two statements.
--
-- sqlc's MySQL engine drops SAVEPOINT statements, so these two are not compiled into
-- runtime/internal/store: runtime/outbox reads them through TxProbe.

SAVEPOINT outboxgen_tx_probe;

RELEASE SAVEPOINT outboxgen_tx_probe;
