// The registry of running Workers by *sql.DB, through which InTx finds the workers to wake and
// to hand messages off to.

package outbox

import (
	"database/sql"
	"sync"
)

// The process-wide registry that lets InTx wake the workers running on a *sql.DB.
var (
	wakeMu  sync.Mutex
	wakeReg = map[*sql.DB]map[*Worker]struct{}{}
)

func registerWorker(db *sql.DB, w *Worker) {
	wakeMu.Lock()
	defer wakeMu.Unlock()
	set := wakeReg[db]
	if set == nil {
		set = map[*Worker]struct{}{}
		wakeReg[db] = set
	}
	set[w] = struct{}{}
}

func unregisterWorker(db *sql.DB, w *Worker) {
	wakeMu.Lock()
	defer wakeMu.Unlock()
	if set := wakeReg[db]; set != nil {
		delete(set, w)
		if len(set) == 0 {
			delete(wakeReg, db)
		}
	}
}

func wakeWorkers(db *sql.DB) {
	wakeMu.Lock()
	defer wakeMu.Unlock()
	for w := range wakeReg[db] {
		w.Wake()
	}
}
