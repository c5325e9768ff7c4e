// Wake for code that commits its own transactions: an ORM's, or a *sql.Tx outside InTx.

package outbox

import "database/sql"

// Wake wakes every Worker of this process that runs on db, so that a message committed just
// now is claimed at once instead of at the next poll. Call it after the commit of a
// transaction that enqueued (an ORM's transaction, or a *sql.Tx outside InTx), with the
// *sql.DB behind it, which must be the very pool the workers were made with. It does nothing
// when no worker runs on db, and never blocks: a wake while the worker is busy is kept and
// acted on when it is free. Workers of other processes still wait for their poll.
func Wake(db *sql.DB) {
	if db == nil {
		return
	}
	running.wake(db)
}
