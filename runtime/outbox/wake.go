// The registry of the Workers running in this process, by *sql.DB. InTx finds in it the workers
// to wake after its commit and the workers to hand messages off to.

package outbox

import (
	"database/sql"
	"sync"
	"sync/atomic"
)

// registry is the state that InTx and Enqueue share with the running Workers. Every entry is
// keyed by a *sql.DB, or by a *sql.Tx of one. InTx on a pool reaches only the workers of that
// pool, so two databases in one process do not see each other.
type registry struct {
	mu      sync.Mutex
	workers map[*sql.DB]map[*Worker]struct{}

	// txs maps the *sql.Tx of each running InTx whose *sql.DB has workers to its hand-off
	// collector. open counts them, so that an Enqueue outside InTx pays one atomic load.
	txs  sync.Map // *sql.Tx -> *handoffTx
	open atomic.Int64
}

// running is the registry of this process. Worker.Run adds its worker, and InTx reads it.
var running = newRegistry()

func newRegistry() *registry {
	return &registry{workers: map[*sql.DB]map[*Worker]struct{}{}}
}

// add records w as running on db until remove.
func (r *registry) add(db *sql.DB, w *Worker) {
	r.mu.Lock()
	defer r.mu.Unlock()
	set := r.workers[db]
	if set == nil {
		set = map[*Worker]struct{}{}
		r.workers[db] = set
	}
	set[w] = struct{}{}
}

func (r *registry) remove(db *sql.DB, w *Worker) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if set := r.workers[db]; set != nil {
		delete(set, w)
		if len(set) == 0 {
			delete(r.workers, db)
		}
	}
}

// wake wakes every worker running on db.
func (r *registry) wake(db *sql.DB) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for w := range r.workers[db] {
		w.Wake()
	}
}

// has reports whether a worker runs on db.
func (r *registry) has(db *sql.DB) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.workers[db]) > 0
}
