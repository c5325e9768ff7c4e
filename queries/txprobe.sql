-- The probe that tells whether a session, such as a *sql.Conn handed to Enqueue, has a
-- transaction open. Inside one, the savepoint lives until its release. Outside, autocommit ends
-- it with the statement, so the release fails with error 1305. MariaDB and MySQL behave alike.
-- Inside a transaction the pair leaves it as it was. No savepoint of this name lives anywhere
-- but between the two statements.
--
-- sqlc's MySQL engine drops SAVEPOINT statements, so these two are not compiled into
-- runtime/internal/store. runtime/outbox reads them through TxProbe.

SAVEPOINT outboxgen_tx_probe;

RELEASE SAVEPOINT outboxgen_tx_probe;
